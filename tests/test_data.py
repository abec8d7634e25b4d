import numpy as np
import pytest

from mtlbench import DataValidationError, TaskSet


def _ok():
    X = np.arange(12.0).reshape(4, 3)
    return X, np.array([1, -1, 1, -1.0])


def test_per_task_and_shared_layouts_agree():
    rng = np.random.default_rng(0)
    items = rng.standard_normal((10, 3))
    idx = [np.array([0, 2, 4, 6]), np.array([1, 3, 5, 7, 9])]
    ys = [np.array([1, -1, 1, -1.0]), np.array([1, 1, -1, -1, 1.0])]
    shared = TaskSet.from_shared_items("p", items, idx, ys)
    per_task = TaskSet.from_arrays("p", [items[i] for i in idx], ys)
    assert shared.T == per_task.T == 2 and shared.d == per_task.d == 3
    for t in range(2):
        np.testing.assert_array_equal(shared.X(t), per_task.X(t))
    sub = shared.subset([np.array([0, 1]), np.array([1, 2])])
    np.testing.assert_array_equal(sub.X(1), items[[3, 5]])
    assert sub.items is items  # no copy of the item matrix


@pytest.mark.parametrize("mutate, message", [
    (lambda X, y: (np.where(X == 5, np.nan, X), y), r"task 'task0'.*NaN/inf \(row 1, column 2\)"),
    (lambda X, y: (X, np.array([1, 0, 1, 0.0])), r"task 'task0'.*\{-1, \+1\}.*map 0 to -1"),
    (lambda X, y: (X, np.array([1, 2, 1, -1.0])), r"task 'task0'.*\{-1, \+1\}, found \[2.0\]"),
    (lambda X, y: (X[:3], y), r"task 'task0'.*shape mismatch, 3 feature rows but 4 labels"),
    (lambda X, y: (X[:0], y[:0]), r"task 'task0'.*empty"),
    (lambda X, y: (X, np.ones(4)), r"task 'task0'.*only one class"),
    (lambda X, y: (X, np.array([1, -1, np.inf, -1])), r"task 'task0'.*labels contain NaN/inf"),
])
def test_validation_errors_name_task_and_problem(mutate, message):
    X, y = mutate(*_ok())
    with pytest.raises(DataValidationError, match=message):
        TaskSet.from_arrays("myproblem", [X, _ok()[0]], [y, _ok()[1]])


def test_feature_dimension_mismatch_between_tasks():
    X, y = _ok()
    with pytest.raises(DataValidationError,
                       match=r"task 'b'.*has 2 features, the first task has 3"):
        TaskSet.from_arrays("p", [X, X[:, :2]], [y, y], task_names=["a", "b"])


def test_shared_items_index_out_of_range_and_nan_items():
    items = np.zeros((3, 2))
    with pytest.raises(DataValidationError, match=r"task 'u1'.*out of range \[0, 3\)"):
        TaskSet.from_shared_items("p", items, [np.array([0, 5])], [np.array([1, -1.0])],
                                  task_names=["u1"])
    items[1, 1] = np.nan
    with pytest.raises(DataValidationError, match=r"item features.*row 1, column 1"):
        TaskSet.from_shared_items("p", items, [np.array([0, 1])], [np.array([1, -1.0])])


def test_empty_dataset():
    with pytest.raises(DataValidationError, match="no tasks"):
        TaskSet.from_arrays("p", [], [])


def test_fingerprint_changes_with_labels():
    X, y = _ok()
    a = TaskSet.from_arrays("p", [X], [y])
    b = TaskSet.from_arrays("p", [X], [-y])
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == TaskSet.from_arrays("p", [X.copy()], [y.copy()]).fingerprint()

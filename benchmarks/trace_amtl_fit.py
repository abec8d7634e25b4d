"""Trace one AMTL fit per outer iteration (diagnosis of slow fits, issue 23 round 9).

Loads ``plugins/mtlbench_models/amtl.py`` (or ``--module PATH``) as text, inserts trace calls
into ``AMTL.fit`` (no change to the solver: the same iterates), fits one (lam, mu) on the
rep-0 training split that ``bench_amtl_objective.py`` uses, and prints per phase segment:
iterations, F / F_0 at its start and end, LM steps accepted / shortened / rejected, the
hand-back reasons, nnz(B), extrapolation successes.  ``--every N`` also prints every N-th
iteration.

    OMP_NUM_THREADS=1 python benchmarks/trace_amtl_fit.py --dataset-params seed=101 \
        --problem attr0 --point 1:1.299
"""
from __future__ import annotations

import argparse
import time
import types
from pathlib import Path

from mtlbench.protocol import ProtocolConfig
from mtlbench.race import race_problem

HERE = Path(__file__).resolve().parent


def _at(indent: int, *lines: str) -> str:
    """Source lines at ``indent`` spaces (a line's own leading spaces add to it)."""
    return "".join(" " * indent + ln + "\n" for ln in lines)


_LM_TRACE = ("_TRACE.append(dict(it=it, ev='lm', F=F, acc=accepted, frac=frac, ncg=n_cg, nu=nu, "
             "strikes=strikes, nnz=int(np.count_nonzero(B))))")
_BCD_TRACE = ("_TRACE.append(dict(it=it, ev='bcd', F=F, ext=n_extrap, beta=beta, cg=n_cg, "
              "nnz=int(np.count_nonzero(B)), near=near, wres=self._w_residual, "
              "dF=hist[-2] - hist[-1] if len(hist) > 1 else 0.0))")
_WINDOW = _at(16, "if F > _GN_WINDOW_FALL * window_F:", "    strikes = _GN_STRIKES")
_HANDBACK = _at(16, "gn, gn_entry, gn_exits = False, _GN_RESUME * F, gn_exits + 1")
_STAT_HANDBACK = _at(20, "gn, gn_entry, gn_exits, near = False, 0.5 * F, gn_exits + 1, True")
_LM_DONE = _at(16, "hist.append(F)", "report_progress(it, F, _certificate(F, certified_level))")
_BCD_DONE = _at(12, "if F <= certified_level:") + " " * 16 + "# the quadratic form cancels"
# (solver source, the same source with a trace call) pairs: the trace adds no solver step
PATCHES = [
    (_WINDOW, _WINDOW + _at(20, "_TRACE.append(dict(it=it, ev='window', F=F))")),
    (_HANDBACK, _at(16, "_TRACE.append(dict(it=it, ev='handback', F=F, strikes=strikes, "
                        "rejects=rejects))") + _HANDBACK),
    (_STAT_HANDBACK, _at(20, "_TRACE.append(dict(it=it, ev='stat_handback', F=F))")
     + _STAT_HANDBACK),
    (_LM_DONE, _at(16, "hist.append(F)", _LM_TRACE,
                   "report_progress(it, F, _certificate(F, certified_level))")),
    (_BCD_DONE, _at(12, _BCD_TRACE) + _BCD_DONE),
    (_at(16, "gn = True"), _at(16, "gn = True", "_TRACE.append(dict(it=it, ev='enter', F=F))")),
]


def load(path: Path):
    src = path.read_text()
    for old, new in PATCHES:
        if old not in src:
            # the stationary hand-back has a different indent in some versions
            raise SystemExit(f"patch target not found: {old[:60]!r}")
        src = src.replace(old, new, 1)
    mod = types.ModuleType("amtl_traced")
    mod.__dict__["_TRACE"] = []
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=str(HERE.parent / "plugins/mtlbench_models/amtl.py"))
    ap.add_argument("--problem", default="attr0")
    ap.add_argument("--dataset", default="synthetic-attributes")
    ap.add_argument("--dataset-params", default="")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--point", default="1:1.299")
    ap.add_argument("--every", type=int, default=0)
    ap.add_argument("--kw", action="append", default=[], help="NAME=VALUE: AMTL parameter")
    ap.add_argument("--set", action="append", default=[],
                    help="NAME=VALUE: override a module constant (e.g. _GN_SWITCH=0.3)")
    args = ap.parse_args()
    from mtlbench.plugins import get_registry
    sel = args.dataset + (f"[{args.dataset_params}]" if args.dataset_params else "")
    tr, _ = race_problem(get_registry(), sel, args.problem, args.data_dir, 0, ProtocolConfig())
    mod = load(Path(args.module))
    for kv in args.set:
        k, v = kv.split("=", 1)
        mod.__dict__[k] = type(mod.__dict__[k])(eval(v))
    lam, mu = (float(v) for v in args.point.split(":"))
    t0 = time.process_time()
    kw = {k: eval(v) for k, v in (kv.split("=", 1) for kv in args.kw)}
    m = mod.AMTL(lam=lam, mu=mu, **kw).fit(tr)
    cpu = time.process_time() - t0
    tr_ = mod.__dict__["_TRACE"]
    F0 = m.objective_history_[0]
    print(f"{tr.name}: T={tr.T} d={tr.d} (lam, mu)=({lam}, {mu}) F0={F0:.6g} iters={m.n_iter_} "
          f"conv={m.converged_} by={m.diagnostics_['converged_by']} cpu={cpu:.2f}s "
          f"F/F0={m.objective_history_[-1] / F0:.3e} nnz={m.diagnostics_['transfers']}")
    print({k: v for k, v in m.diagnostics_.items() if k not in ("out_degree",)})
    # segments
    seg, prev_ext = None, 0

    def flush(s):
        if s is None:
            return
        extra = ""
        if s["ph"] == "lm":
            extra = (f" acc {s['acc']} short {s['short']} rej {s['rej']} cg {s['cg']} "
                     f"nu {s['nu0']:.2e}->{s['nu1']:.2e}")
        else:
            extra = f" ext {s['ext']} wcg {s['cg']}"
        print(f"  {s['ph']:3s} it {s['i0']:5d}-{s['i1']:5d} ({s['i1'] - s['i0'] + 1:4d}) "
              f"F/F0 {s['F0'] / F0:.3e} -> {s['F1'] / F0:.3e} nnz {s['nnz0']}->{s['nnz1']}{extra}")

    for r in tr_:
        ev = r["ev"]
        if ev in ("lm", "bcd"):
            if seg is None or seg["ph"] != ev:
                flush(seg)
                seg = dict(ph=ev, i0=r["it"], F0=r["F"], nnz0=r["nnz"], acc=0, short=0, rej=0,
                           cg=0, ext=0, nu0=r.get("nu", 0.0))
            seg["i1"], seg["F1"], seg["nnz1"] = r["it"], r["F"], r["nnz"]
            if ev == "lm":
                seg["acc"] += r["acc"]
                seg["rej"] += not r["acc"]
                seg["short"] += r["acc"] and r["frac"] < 1.0
                seg["cg"] += r["ncg"]
                seg["nu1"] = r["nu"]
            else:
                seg["ext"] += r["ext"] - prev_ext
                prev_ext = r["ext"]
                seg["cg"] += r["cg"]
            if args.every and r["it"] % args.every == 0:
                print("     ", {k: (f"{v:.4g}" if isinstance(v, float) else v)
                                for k, v in r.items()})
        else:
            flush(seg)
            seg = None
            print(f"  -- {ev} at it {r['it']}: F/F0 {r['F'] / F0:.3e}",
                  {k: v for k, v in r.items() if k not in ('it', 'ev', 'F')})
    flush(seg)


if __name__ == "__main__":
    main()

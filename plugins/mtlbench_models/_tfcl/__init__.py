"""Shared numerics of the TFCL family (private; the models live in ``tfcl.py`` and ``tfcl_q.py``).

Modules, lowest first (each imports only the ones above it):

* ``eigen``  -- the bipartite feature-task Laplacian L(W) and the per-component eigensolvers
  (dense ``eigh``; ARPACK shift-invert through the Schur complement);
* ``ustep``  -- the closed-form U-step of Thm. eigsol in factored form (``UStep``, ``ustep``,
  ``ustep_dense``, ``ustep_diff_norm``), ``UStepper`` (a fit's U-steps, skipping the
  eigensolver where Weyl's inequality proves the answer) and the groups read from the
  spectral embedding;
* ``core``   -- what every TFCL-family fit shares: the W-step of Prop. sol, the loss objects
  and data scales, the task-feature graph's columns (``graph_columns``, ``GraphView``),
  parameter checks, the stopping rule and FISTA's momentum sequence;
* ``polish`` -- the exact minimiser of the fixed-U subproblem on a fixed structure
  (``FixedStructure``; with TFCL-Q's personal columns ``PersonalStructure``) and its
  optimality checks (``kkt_ok``, ``kkt_shared_personal_ok``).

This package imports no model module, so the built-in model plugins (``tfcl``, ``tfcl_q``,
``tfcl_check``) depend on it and not on each other.  Nothing is imported here: import from the
submodules.
"""

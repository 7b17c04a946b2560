"""The report of a sweep: the papers' tables and curves with the published numbers beside ours.

Experiment configs tell the report how to label their runs with the ``report:`` node of
``conf/config.yaml``:

- ``report.method``: the row label of the run's method (set in ``conf/method/<paper>/<x>.yaml``). To
  get the published number beside a cell it must equal the ``method`` column of its paper's CSV
  (case and spacing aside), e.g. ``BDML``, ``MS``, ``EPS + Triplet + semi-hard``. Unset: the label of
  the published method whose groups the run chose (``loss=triplet miner=fixed_semihard``: "Triplet +
  fixed semi-hard"), else ``<loss> + <miner>`` from Hydra's choices.
- ``report.figure``: ``<paper>/<what>``, e.g. ``le2019/fig1_sop``; groups runs into one table and its
  figures, and its first part picks the paper (:mod:`noisydml.report.papers`), whose published figures
  the figures cite when the runs recorded that experiment (``experiment=``). Unset: the run's ``name``.
- ``report.dataset`` (optional): the ``dataset`` label of the published table when it is not the
  config's ``dataset.name``, e.g. ``mnist_even_odd``, ``omniglot_letters``, ``ms_celeb``.

Columns are whatever the sweep varies (noise rate, lambda, embedding size, ...); see
:mod:`noisydml.report.tables`. Entry point: :func:`noisydml.report.cli.main` (``noisydml-report``), which
writes report.md and the same page as report.html (:mod:`noisydml.report.page`).
"""

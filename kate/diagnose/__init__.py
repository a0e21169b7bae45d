"""Diagnostics: does a model really call tools, or only talk about them? (strict vs keyword scoring).

The knowing-doing analysis (arXiv 2605.14038) on verifiable sets (``arithmetic``, ``bfcl_decision``,
``user_set``): model-adaptive ``necessity``, the four-way ``breakdown``, hidden-state ``probes``
(``hidden``, ``internals``), ``pcall``; ``plan_execute`` (does the model do what it says it will?);
the probe behind When2Tool's gate and its tau sweep (``gate``; the sampler is
``kate.sampling.gate``); the ``report``. ``kate diagnose`` (``kate/diagnose_cmd.py``) runs them."""

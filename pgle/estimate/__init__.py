"""`pgle estimate`: what PGLE would buy, predicted with XLA:GPU's own compiler and scheduler on a
machine without a GPU (docs/guide/will-pgle-help.md).

`targets` (XLA's GPU target specs), `compile_child` (one deviceless compile per arm, in a child
process), `xla_stats` (the latency-hiding scheduler's statistics lines), `hlo` (the scheduled
module), `kinds` (an instruction's kind), `costs` (costs per instruction: derived, from a
profile, what-if), `replay` (pgle's simulator of a schedule), `prediction` (the verdict).
"""

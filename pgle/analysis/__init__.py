"""What PGLE bought, and why: analyses behind `pgle report` (overlap, schedule, throughput,
memory, diagnostics) and the self-contained HTML page that shows them."""

"""The paper's evaluation end to end: the run plan (`plan`), the paper's numbers and verdicts
(`paper`, `headline`), figures, the quota tracer, and the Markdown report (`report`)."""

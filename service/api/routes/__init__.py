"""One router per resource: train, predict, models, jobs, health."""

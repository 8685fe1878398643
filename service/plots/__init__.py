"""plots: every plot the service draws, and what a training stores for them."""

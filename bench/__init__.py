"""Benchmarks: bsvm against scikit-learn, side by side in one process."""

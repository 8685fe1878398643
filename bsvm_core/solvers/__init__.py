"""Solvers: plain functions on arrays (maths only); the estimators are thin objects around them."""

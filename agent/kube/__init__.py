"""Kubernetes' own rules for names, shared by everything that reads or writes them."""

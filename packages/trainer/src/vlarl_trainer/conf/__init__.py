"""Hydra configs of vlarl-train: config.yaml and the recipes under recipe/."""

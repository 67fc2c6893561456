"""Model adapters: timm/MONAI networks, CLIP zero-shot, LVLMs, training protocols."""

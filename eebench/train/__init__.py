"""Fine-tuning: settings (config), the loop over a method's stages, and checkpoints."""

"""Multi-exit models over Hugging Face encoders: backbones (light) and the model (torch)."""

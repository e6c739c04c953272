"""kettle.kernels: numeric kernels (PCM codecs, resampling, log-mel).

Imports nothing from kettle.
"""

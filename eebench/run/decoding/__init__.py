"""Decoder runs: early exit in a causal LM over a decoder task, every operating point in one run
(eebench.run.decoding.run), its records (records), humaneval-gen's greedy points (greedy),
imdb-lm's teacher-forced points (teacher) and real-decoding wall time (timing)."""

from eebench.run.decoding.records import DecodeConfig, DecoderPoint, DecodeSummary, DecodeTiming
from eebench.run.decoding.run import (
    DecodeOptions,
    DecodeRun,
    decoder_run_dir,
    read_decoder_run,
    run_decoder,
)

__all__ = ["DecodeConfig", "DecodeOptions", "DecodeRun", "DecodeSummary", "DecodeTiming",
           "DecoderPoint", "decoder_run_dir", "read_decoder_run", "run_decoder"]

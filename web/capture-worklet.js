// AudioWorklet processor: microphone at the AudioContext's rate -> 16 kHz s16le frames.
// It runs on the audio thread, so it only converts and posts; the main thread does the network.
import { FrameAssembler, StreamResampler } from "./resample.js";

const TARGET_RATE = 16000;

class KettleCaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const frameMs = options?.processorOptions?.frameMs ?? 60;
    // `sampleRate` is the AudioWorkletGlobalScope's context rate (often 48000 or 44100).
    this.resampler = new StreamResampler(sampleRate, TARGET_RATE);
    this.frames = new FrameAssembler(Math.round((TARGET_RATE * frameMs) / 1000));
    this.mono = new Float32Array(128);
    this.running = true;
    this.port.onmessage = (event) => {
      if (event.data?.type === "flush") this.flush();
    };
    this.port.postMessage({ type: "started", contextRate: sampleRate, frameSamples: this.frames.frameSamples });
  }

  post(frame) {
    this.port.postMessage(
      { type: "frame", pcm: frame.pcm.buffer, samples: frame.pcm.length, peak: frame.peak, rms: frame.rms },
      [frame.pcm.buffer],
    );
  }

  // Stop: emit everything still held (the filter's look-ahead and the partial frame).
  flush() {
    if (!this.running) return;
    this.running = false;
    for (const frame of this.frames.push(this.resampler.flush())) this.post(frame);
    const rest = this.frames.takeRest();
    if (rest) this.post(rest);
    this.port.postMessage({ type: "flushed" });
  }

  process(inputs) {
    if (!this.running) return false;
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no input connected yet
    let mono = channels[0];
    if (channels.length > 1) {
      // Down-mix: the average of the channels.
      if (this.mono.length !== mono.length) this.mono = new Float32Array(mono.length);
      this.mono.fill(0);
      for (const ch of channels) for (let i = 0; i < ch.length; i++) this.mono[i] += ch[i];
      for (let i = 0; i < this.mono.length; i++) this.mono[i] /= channels.length;
      mono = this.mono;
    }
    for (const frame of this.frames.push(this.resampler.process(mono))) this.post(frame);
    return true;
  }
}

registerProcessor("kettle-capture", KettleCaptureProcessor);

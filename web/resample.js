// Pure audio arithmetic shared by the capture worklet and the node unit tests.
//
// StreamResampler converts a stream of float samples from one rate to another (the page uses
// it for the AudioContext's 44.1 or 48 kHz to kettle's 16 kHz) with a Kaiser-windowed sinc
// low-pass evaluated at the exact fractional input position of every output sample. Positions
// are kept as an integer plus a rational fraction (in/out reduced by their gcd), so the output
// never drifts however many 128-sample render quanta pass, and the result does not depend on
// how the input is chunked: output n is computed from the same inputs in the same order.

const DEFAULTS = Object.freeze({
  zeroCrossings: 32, // sinc zero crossings each side: sets the filter length (~200 taps at 48 kHz)
  rolloff: 0.94, // cutoff as a fraction of the lower rate's Nyquist (7.52 kHz at 16 kHz out)
  beta: 8.0, // Kaiser window shape: ~80 dB stop band
});

// Above this many distinct phases the coefficient table would be large; compute on the fly.
const MAX_TABLE_PHASES = 4096;

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

// Modified Bessel function of the first kind, order 0 (power series; converges fast here).
function besselI0(x) {
  const q = (x * x) / 4;
  let term = 1;
  let sum = 1;
  for (let k = 1; k < 64; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

/** Number of output samples that `inputLength` input samples map to: floor(n * out / in). */
export function expectedOutputLength(inputLength, inRate, outRate) {
  return Math.floor((inputLength * outRate) / inRate);
}

export class StreamResampler {
  /**
   * @param {number} inRate  input sample rate in Hz (a positive integer)
   * @param {number} outRate output sample rate in Hz (a positive integer)
   * @param {{zeroCrossings?: number, rolloff?: number, beta?: number}} [options]
   */
  constructor(inRate, outRate = 16000, options = {}) {
    for (const [name, rate] of [["inRate", inRate], ["outRate", outRate]]) {
      if (!Number.isInteger(rate) || rate <= 0) {
        throw new RangeError(`${name} must be a positive integer, got ${rate}`);
      }
    }
    const opts = { ...DEFAULTS, ...options };
    if (!(opts.rolloff > 0 && opts.rolloff <= 1)) throw new RangeError("rolloff must be in (0, 1]");
    if (!(opts.zeroCrossings >= 2)) throw new RangeError("zeroCrossings must be >= 2");
    this.inRate = inRate;
    this.outRate = outRate;
    const g = gcd(inRate, outRate);
    this._step = inRate / g; // input advance per output, as a fraction step / phases
    this._phases = outRate / g;
    // Cutoff in cycles per input sample, below the Nyquist of the lower of the two rates.
    this._fc = 0.5 * opts.rolloff * Math.min(1, outRate / inRate);
    // Half the filter length in input samples; taps run from ipos-half+1 to ipos+half.
    this._half = Math.ceil(opts.zeroCrossings / (2 * this._fc));
    this._taps = 2 * this._half;
    this._beta = opts.beta;
    this._i0beta = besselI0(opts.beta);
    this._table = null;
    if (this._phases <= MAX_TABLE_PHASES) {
      this._table = new Float32Array(this._phases * this._taps);
      for (let p = 0; p < this._phases; p++) {
        this._table.set(this._kernel(p), p * this._taps);
      }
    }
    // Input history: _buf[0] holds the sample with absolute index _bufStart. Indices below 0
    // are zeros, so the first output (at input position 0) sees silence before the stream.
    this._buf = new Float32Array(Math.max(4 * this._taps, 4096));
    this._bufStart = -this._half;
    this._bufLen = this._half;
    this._ipos = 0; // integer part of the next output's input position
    this._frac = 0; // fractional part, in units of 1/_phases
    this._flushed = false;
  }

  /** Input samples of delay before an input sample can influence the output. */
  get latencyInputSamples() {
    return this._half;
  }

  // Filter taps for fractional phase p (position = ipos + p / phases), normalised to unit DC gain.
  _kernel(p) {
    const taps = new Float32Array(this._taps);
    const t = p / this._phases;
    const twoFc = 2 * this._fc;
    let sum = 0;
    const w = new Float64Array(this._taps);
    for (let j = 0; j < this._taps; j++) {
      const d = j - this._half + 1 - t; // distance from the output position, in input samples
      const x = d / (this._half + 1);
      const window = Math.abs(x) >= 1 ? 0 : besselI0(this._beta * Math.sqrt(1 - x * x)) / this._i0beta;
      const arg = Math.PI * twoFc * d;
      const sinc = arg === 0 ? 1 : Math.sin(arg) / arg;
      w[j] = twoFc * sinc * window;
      sum += w[j];
    }
    for (let j = 0; j < this._taps; j++) taps[j] = w[j] / sum;
    return taps;
  }

  _append(input) {
    const need = this._bufLen + input.length;
    if (need > this._buf.length) {
      const grown = new Float32Array(Math.max(need, 2 * this._buf.length));
      grown.set(this._buf.subarray(0, this._bufLen));
      this._buf = grown;
    }
    this._buf.set(input, this._bufLen);
    this._bufLen = need;
  }

  /**
   * Feed input samples; returns every output sample that can be computed so far.
   * @param {Float32Array|number[]} input
   * @returns {Float32Array}
   */
  process(input) {
    if (this._flushed) throw new Error("StreamResampler: process() after flush()");
    this._append(input instanceof Float32Array ? input : Float32Array.from(input));
    return this._drain();
  }

  /**
   * End of stream: emit the outputs whose positions lie within the input received, as if
   * zeros followed it. Total output is then exactly expectedOutputLength(total input).
   * @returns {Float32Array}
   */
  flush() {
    if (this._flushed) return new Float32Array(0);
    const totalIn = this._bufStart + this._bufLen;
    const wanted = expectedOutputLength(totalIn, this.inRate, this.outRate);
    const outputsSoFar = this._outputsSoFar();
    const missing = Math.max(0, Math.ceil(wanted - outputsSoFar));
    this._append(new Float32Array(this._half + 1));
    const out = this._drain(missing);
    this._flushed = true;
    return out;
  }

  _outputsSoFar() {
    // Output n sits at n * step / phases; invert the running position.
    return (this._ipos * this._phases + this._frac) / this._step;
  }

  _drain(limit = Infinity) {
    const end = this._bufStart + this._bufLen; // one past the last absolute input index
    // Output at ipos needs inputs up to ipos + half.
    const available = end - this._half - this._ipos; // rough upper bound of outputs
    if (available <= 0 || limit <= 0) return new Float32Array(0);
    const maxOut = Math.min(limit, Math.ceil((available * this._phases) / this._step) + 1);
    const out = new Float32Array(maxOut);
    const buf = this._buf;
    const taps = this._taps;
    let n = 0;
    while (n < maxOut && this._ipos + this._half < end) {
      const kernel = this._table
        ? this._table.subarray(this._frac * taps, this._frac * taps + taps)
        : this._kernel(this._frac);
      let base = this._ipos - this._half + 1 - this._bufStart;
      let acc = 0;
      for (let j = 0; j < taps; j++) acc += buf[base + j] * kernel[j];
      out[n++] = acc;
      this._frac += this._step;
      while (this._frac >= this._phases) {
        this._frac -= this._phases;
        this._ipos += 1;
      }
    }
    // Drop history the next output no longer needs.
    const keepFrom = this._ipos - this._half + 1 - this._bufStart;
    if (keepFrom > 0) {
      this._buf.copyWithin(0, keepFrom, this._bufLen);
      this._bufLen -= keepFrom;
      this._bufStart += keepFrom;
    }
    return n === maxOut ? out : out.subarray(0, n);
  }
}

/**
 * Float samples in [-1, 1] to signed 16-bit little-endian PCM values, rounding to nearest and
 * clipping anything outside the range (a hot microphone must saturate, not wrap around).
 * @param {Float32Array} input
 * @param {Int16Array} [out] optional destination of at least input.length
 * @returns {Int16Array}
 */
export function floatToS16(input, out = new Int16Array(input.length)) {
  for (let i = 0; i < input.length; i++) {
    const x = input[i] * 32767;
    const v = x < 0 ? -Math.round(-x) : Math.round(x); // half away from zero: symmetric
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : Number.isNaN(v) ? 0 : v;
  }
  return out;
}

/**
 * Collects 16 kHz int16 samples into fixed-size frames for the WebSocket.
 * push() returns the frames completed by this call; takeRest() returns the partial tail.
 */
export class FrameAssembler {
  constructor(frameSamples) {
    if (!Number.isInteger(frameSamples) || frameSamples <= 0) {
      throw new RangeError("frameSamples must be a positive integer");
    }
    this.frameSamples = frameSamples;
    this._frame = new Int16Array(frameSamples);
    this._fill = 0;
    this._sumSq = 0;
    this._peak = 0;
  }

  /** @param {Float32Array} samples @returns {{pcm: Int16Array, peak: number, rms: number}[]} */
  push(samples) {
    const done = [];
    let i = 0;
    while (i < samples.length) {
      const n = Math.min(samples.length - i, this.frameSamples - this._fill);
      const part = samples.subarray(i, i + n);
      floatToS16(part, this._frame.subarray(this._fill, this._fill + n));
      for (let j = 0; j < n; j++) {
        const v = part[j];
        this._sumSq += v * v;
        const a = v < 0 ? -v : v;
        if (a > this._peak) this._peak = a;
      }
      this._fill += n;
      i += n;
      if (this._fill === this.frameSamples) done.push(this._emit(this._frame));
    }
    return done;
  }

  /** The samples collected since the last full frame (possibly none), as a frame. */
  takeRest() {
    if (this._fill === 0) return null;
    return this._emit(this._frame.slice(0, this._fill));
  }

  _emit(pcm) {
    const frame = {
      pcm: pcm === this._frame ? pcm.slice() : pcm,
      peak: Math.min(1, this._peak),
      rms: Math.sqrt(this._sumSq / Math.max(1, this._fill)),
    };
    this._fill = 0;
    this._sumSq = 0;
    this._peak = 0;
    return frame;
  }
}

// Unit tests of the capture worklet's arithmetic (web/resample.js), run with `node --test`.
import assert from "node:assert/strict";
import test from "node:test";

import {
  FrameAssembler,
  StreamResampler,
  expectedOutputLength,
  floatToS16,
} from "../../web/resample.js";

const QUANTUM = 128; // an AudioWorklet render quantum

function sine(rate, freq, seconds, amplitude = 0.5, phase = 0) {
  const n = Math.round(rate * seconds);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amplitude * Math.sin((2 * Math.PI * freq * i) / rate + phase);
  return x;
}

// Feed `input` in chunks of the given sizes (cycled), then flush; return all output.
function resampleChunked(resampler, input, sizes) {
  const parts = [];
  let i = 0;
  let k = 0;
  while (i < input.length) {
    const n = sizes[k++ % sizes.length];
    parts.push(resampler.process(input.subarray(i, i + n)));
    i += n;
  }
  parts.push(resampler.flush());
  const total = parts.reduce((a, p) => a + p.length, 0);
  const out = new Float32Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

// Least-squares fit of a*sin + b*cos at `freq`: amplitude and the residual's RMS.
function fitTone(x, rate, freq) {
  let ss = 0, sc = 0, cc = 0, xs = 0, xc = 0;
  for (let i = 0; i < x.length; i++) {
    const w = (2 * Math.PI * freq * i) / rate;
    const s = Math.sin(w), c = Math.cos(w);
    ss += s * s; sc += s * c; cc += c * c; xs += x[i] * s; xc += x[i] * c;
  }
  const det = ss * cc - sc * sc;
  const a = (xs * cc - xc * sc) / det;
  const b = (xc * ss - xs * sc) / det;
  let res = 0;
  for (let i = 0; i < x.length; i++) {
    const w = (2 * Math.PI * freq * i) / rate;
    const e = x[i] - a * Math.sin(w) - b * Math.cos(w);
    res += e * e;
  }
  return { amplitude: Math.hypot(a, b), residualRms: Math.sqrt(res / x.length) };
}

function rms(x) {
  let s = 0;
  for (const v of x) s += v * v;
  return Math.sqrt(s / x.length);
}

// Skip the filter's start-up transient at both ends before measuring.
const trim = (x, n = 400) => x.subarray(n, x.length - n);

for (const inRate of [44100, 48000]) {
  test(`${inRate} -> 16000: a sine keeps its frequency and amplitude`, () => {
    for (const freq of [440, 1000, 3000, 6000]) {
      const out = resampleChunked(new StreamResampler(inRate, 16000), sine(inRate, freq, 2), [QUANTUM]);
      const fit = fitTone(trim(out), 16000, freq);
      assert.ok(Math.abs(fit.amplitude - 0.5) < 0.5 * 0.005, `${freq} Hz amplitude ${fit.amplitude}`);
      // A wrong frequency (drift) would leave the whole tone in the residual.
      assert.ok(fit.residualRms < 1e-3, `${freq} Hz residual ${fit.residualRms}`);
    }
  });

  test(`${inRate} -> 16000: output length follows the ratio over many quanta (no drift)`, () => {
    const r = new StreamResampler(inRate, 16000);
    let inTotal = 0;
    let outTotal = 0;
    const quantum = new Float32Array(QUANTUM).fill(0.1);
    for (let q = 0; q < 30000; q++) { // 30000 quanta: 80 s at 48 kHz
      outTotal += r.process(quantum).length;
      inTotal += QUANTUM;
      // Only the filter's look-ahead (a fixed number of samples) may be outstanding.
      const expected = expectedOutputLength(inTotal, inRate, 16000);
      const lag = expected - outTotal;
      assert.ok(lag >= 0 && lag <= Math.ceil((r.latencyInputSamples * 16000) / inRate) + 1, `lag ${lag}`);
    }
    outTotal += r.flush().length;
    assert.equal(outTotal, expectedOutputLength(inTotal, inRate, 16000));
  });

  test(`${inRate} -> 16000: the output does not depend on how the input is chunked`, () => {
    const x = sine(inRate, 523.25, 1.3, 0.7);
    for (let i = 0; i < x.length; i += 997) x[i] += 0.2; // some clicks so it is not a pure tone
    const reference = resampleChunked(new StreamResampler(inRate, 16000), x, [x.length]);
    for (const sizes of [[QUANTUM], [1], [7, 300, 1, 128, 2048], [4096]]) {
      const out = resampleChunked(new StreamResampler(inRate, 16000), x, sizes);
      assert.equal(out.length, reference.length);
      assert.deepEqual(out, reference, `chunk sizes ${sizes}`);
    }
  });

  test(`${inRate} -> 16000: content above 8 kHz is filtered out, not aliased`, () => {
    for (const freq of [9000, 12000, 15000]) {
      const out = resampleChunked(new StreamResampler(inRate, 16000), sine(inRate, freq, 1, 0.9), [QUANTUM]);
      const level = rms(trim(out)) / (0.9 / Math.SQRT2);
      assert.ok(level < 1e-3, `${freq} Hz leaks at ${20 * Math.log10(level)} dB`);
    }
  });
}

test("DC passes with unit gain and silence stays silent", () => {
  const out = resampleChunked(new StreamResampler(44100, 16000), new Float32Array(44100).fill(0.25), [QUANTUM]);
  for (const v of trim(out)) assert.ok(Math.abs(v - 0.25) < 1e-5);
  const silent = resampleChunked(new StreamResampler(48000, 16000), new Float32Array(4800), [QUANTUM]);
  assert.ok(silent.every((v) => v === 0));
});

test("other rates, including upsampling, keep a tone", () => {
  for (const inRate of [8000, 22050, 32000, 96000, 44056]) {
    const out = resampleChunked(new StreamResampler(inRate, 16000), sine(inRate, 700, 1), [QUANTUM]);
    assert.equal(out.length, expectedOutputLength(inRate, inRate, 16000));
    const fit = fitTone(trim(out), 16000, 700);
    assert.ok(Math.abs(fit.amplitude - 0.5) < 0.005, `${inRate}: amplitude ${fit.amplitude}`);
  }
});

test("bad rates are refused", () => {
  assert.throws(() => new StreamResampler(0, 16000), RangeError);
  assert.throws(() => new StreamResampler(44100.5, 16000), RangeError);
  assert.throws(() => new StreamResampler(48000, -1), RangeError);
});

test("float to s16 rounds and clips instead of wrapping", () => {
  const out = floatToS16(Float32Array.from([0, 0.5, -0.5, 1, -1, 1.5, -3, 1e9, Number.NaN, 1 / 32767]));
  assert.deepEqual(Array.from(out), [0, 16384, -16384, 32767, -32767, 32767, -32768, 32767, 0, 1]);
  // A clipped 16 kHz tone saturates at the rails and keeps its sign everywhere.
  const hot = floatToS16(sine(16000, 1000, 0.01, 2.0));
  const x = sine(16000, 1000, 0.01, 2.0);
  for (let i = 0; i < x.length; i++) {
    if (Math.abs(x[i]) >= 1) assert.equal(Math.abs(hot[i]), x[i] > 0 ? 32767 : 32768);
    else assert.equal(hot[i], Math.sign(x[i]) * Math.round(Math.abs(x[i]) * 32767) + 0);
  }
});

test("frames have the requested size, carry the level, and the rest is kept", () => {
  const fa = new FrameAssembler(960);
  const frames = [];
  const x = sine(16000, 500, 0.2, 0.5); // 3200 samples: 3 frames and 320 over
  for (let i = 0; i < x.length; i += 100) frames.push(...fa.push(x.subarray(i, i + 100)));
  assert.equal(frames.length, 3);
  for (const f of frames) {
    assert.equal(f.pcm.length, 960);
    assert.ok(Math.abs(f.peak - 0.5) < 0.01);
    assert.ok(Math.abs(f.rms - 0.5 / Math.SQRT2) < 0.01);
  }
  const rest = fa.takeRest();
  assert.equal(rest.pcm.length, 320);
  assert.equal(fa.takeRest(), null);
  // The frames together are exactly the converted input.
  const joined = [...frames.map((f) => Array.from(f.pcm)), Array.from(rest.pcm)].flat();
  assert.deepEqual(joined, Array.from(floatToS16(x)));
});

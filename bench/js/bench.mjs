// JavaScript lanes of the grelmicro[jwt] benchmark: fast-jwt (cache off and on)
// and jose, on Node and on Bun, with the keys and token bytes of bench/fixtures.py.
//
// Same method as the Python lanes: each lane is checked first (right claims
// back; expired, wrong-audience and tampered tokens rejected), then 1,000
// warm-up calls, a calibration so one round lasts about ROUND_MS, and ROUNDS
// rounds with the lanes interleaved; median and minimum per call. The token
// is made into a fresh string from bytes on every call.
//
// Usage: node bench.mjs FIXTURES OUT [ROUNDS] [ROUND_MS]   (or: bun bench.mjs ...)

import { readFileSync, writeFileSync } from 'node:fs'
import { isDeepStrictEqual } from 'node:util'
import { createVerifier } from 'fast-jwt'
import { importSPKI, jwtVerify } from 'jose'

const [fixturesPath, outPath, roundsArg, roundMsArg] = process.argv.slice(2)
const ROUNDS = Number(roundsArg ?? 15)
const ROUND_MS = Number(roundMsArg ?? 20)
const fx = JSON.parse(readFileSync(fixturesPath, 'utf8'))
const version = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version
const isBun = typeof globalThis.Bun !== 'undefined'
const runtime = isBun ? `Bun ${globalThis.Bun.version}` : `Node ${process.version}`
const SUITES = new Set(['algs', 'algs-extra', 'sizes', 'secrets'])

async function makeLanes (c) {
  const key = fx.keys[c.key]
  const hmac = c.alg.startsWith('HS')
  const secret = hmac ? Buffer.from(key.secret_b64, 'base64') : null
  const common = {
    algorithms: [c.alg],
    allowedAud: fx.audience,
    allowedIss: fx.issuer,
    requiredClaims: ['exp'],
    clockTolerance: 0
  }
  const lanes = []
  for (const [id, cache] of [['fast-jwt', false], ['fast-jwt-cache', true]]) {
    const name = `fast-jwt ${version('fast-jwt')} (cache ${cache ? 'on' : 'off'})`
    try {
      const verify = createVerifier({ ...common, key: hmac ? secret : key.pem, cache })
      lanes.push({ id, name, group: 'peer', sync: true, fn: verify })
    } catch (err) {
      lanes.push({ id, name, group: 'peer', status: 'unsupported', reason: String(err).slice(0, 200) })
    }
  }
  const joseName = `jose ${version('jose')}`
  try {
    const k = hmac ? new Uint8Array(secret) : await importSPKI(key.pem, c.alg)
    const options = { algorithms: [c.alg], audience: fx.audience, issuer: fx.issuer, requiredClaims: ['exp'] }
    lanes.push({
      id: 'jose',
      name: joseName,
      group: 'peer',
      sync: false,
      fn: async (tok) => (await jwtVerify(tok, k, options)).payload
    })
  } catch (err) {
    lanes.push({ id: 'jose', name: joseName, group: 'peer', status: 'unsupported', reason: String(err).slice(0, 200) })
  }
  return lanes
}

async function check (lane, c) {
  let claims
  try {
    claims = await lane.fn(c.tokens.valid)
  } catch (err) {
    return `valid token refused: ${String(err).slice(0, 200)}`
  }
  if (!isDeepStrictEqual({ ...claims }, c.payload)) return 'wrong claims back'
  for (const which of ['expired', 'wrong_aud', 'tampered']) {
    let accepted = true
    try {
      await lane.fn(c.tokens[which])
    } catch {
      accepted = false
    }
    if (accepted) return `accepted the ${which} token`
  }
  return null
}

function loopSync (fn, raw, n) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) fn(raw.toString('latin1'))
  return Number(process.hrtime.bigint() - t0)
}

async function loopAsync (fn, raw, n) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) await fn(raw.toString('latin1'))
  return Number(process.hrtime.bigint() - t0)
}

const loop = (lane, raw, n) => (lane.sync ? loopSync(lane.fn, raw, n) : loopAsync(lane.fn, raw, n))

function median (values) {
  const v = [...values].sort((a, b) => a - b)
  const m = v.length >> 1
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2
}

const results = []
for (const c of fx.cases) {
  if (!SUITES.has(c.suite)) continue
  const lanes = await makeLanes(c)
  for (const lane of lanes) {
    lane.status ??= 'ok'
    lane.reason ??= ''
    if (lane.status === 'ok') {
      const problem = await check(lane, c)
      if (problem) Object.assign(lane, { status: 'failed', reason: problem })
    }
  }
  const raw = Buffer.from(c.tokens.valid, 'latin1')
  const ready = lanes.filter((l) => l.status === 'ok')
  for (const lane of ready) {
    await loop(lane, raw, 1000)
    let n = 8
    let spent
    for (;;) {
      spent = await loop(lane, raw, n)
      if (spent >= 2e6 || n >= 1 << 22) break
      n *= 4
    }
    lane.calls = Math.max(3, Math.floor((ROUND_MS * 1e6) / (spent / n)))
    lane.perCall = []
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < ready.length; k++) {
      const lane = ready[(k + r) % ready.length]
      lane.perCall.push((await loop(lane, raw, lane.calls)) / lane.calls)
    }
  }
  for (const lane of lanes) {
    const rec = {
      suite: c.suite,
      case: c.name,
      lane_id: lane.id,
      lane: lane.name,
      group: lane.group,
      status: lane.status,
      reason: lane.reason,
      note: ''
    }
    if (lane.status === 'ok') {
      Object.assign(rec, {
        median_ns: median(lane.perCall),
        min_ns: Math.min(...lane.perCall),
        rounds: ROUNDS,
        calls_per_round: lane.calls
      })
    }
    results.push(rec)
  }
  process.stderr.write(`[${isBun ? 'bun' : 'node'}] ${c.name}: ${ready.length} lanes timed\n`)
}

writeFileSync(
  outPath,
  JSON.stringify({
    env: isBun ? 'bun' : 'node',
    meta: { runtime, versions: { 'fast-jwt': version('fast-jwt'), jose: version('jose') } },
    results
  }, null, 1)
)

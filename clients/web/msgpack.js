// A small MessagePack decoder (the subset clothcast's server writes: maps, arrays,
// strings, bin, integers, floats, booleans, nil). `bin` values come back as Uint8Array
// views into the message (no copy). Throws on malformed or truncated input.

export class MsgpackError extends Error {}

export function decode(buffer) {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = new TextDecoder("utf-8", { fatal: true });
  let pos = 0;
  const need = (n) => { if (pos + n > bytes.length) throw new MsgpackError("truncated MessagePack"); };
  const str = (n) => { need(n); const s = text.decode(bytes.subarray(pos, pos + n)); pos += n; return s; };
  const bin = (n) => { need(n); const b = bytes.subarray(pos, pos + n); pos += n; return b; };
  const arr = (n, depth) => { const a = new Array(Math.min(n, bytes.length)); for (let i = 0; i < n; i++) a[i] = value(depth + 1); return a; };
  const map = (n, depth) => {
    const o = {};
    for (let i = 0; i < n; i++) {
      const k = value(depth + 1);
      if (typeof k !== "string") throw new MsgpackError("non-string map key");
      o[k] = value(depth + 1);
    }
    return o;
  };
  function value(depth) {
    if (depth > 32) throw new MsgpackError("MessagePack nested too deeply");
    need(1);
    const t = bytes[pos++];
    if (t <= 0x7f) return t;
    if (t >= 0xe0) return t - 256;
    if ((t & 0xf0) === 0x80) return map(t & 0x0f, depth);
    if ((t & 0xf0) === 0x90) return arr(t & 0x0f, depth);
    if ((t & 0xe0) === 0xa0) return str(t & 0x1f);
    let v;
    switch (t) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: need(1); v = bytes[pos]; pos += 1; return bin(v);
      case 0xc5: need(2); v = view.getUint16(pos); pos += 2; return bin(v);
      case 0xc6: need(4); v = view.getUint32(pos); pos += 4; return bin(v);
      case 0xca: need(4); v = view.getFloat32(pos); pos += 4; return v;
      case 0xcb: need(8); v = view.getFloat64(pos); pos += 8; return v;
      case 0xcc: need(1); return bytes[pos++];
      case 0xcd: need(2); v = view.getUint16(pos); pos += 2; return v;
      case 0xce: need(4); v = view.getUint32(pos); pos += 4; return v;
      case 0xcf: need(8); v = Number(view.getBigUint64(pos)); pos += 8; return v;
      case 0xd0: need(1); v = view.getInt8(pos); pos += 1; return v;
      case 0xd1: need(2); v = view.getInt16(pos); pos += 2; return v;
      case 0xd2: need(4); v = view.getInt32(pos); pos += 4; return v;
      case 0xd3: need(8); v = Number(view.getBigInt64(pos)); pos += 8; return v;
      case 0xd9: need(1); v = bytes[pos]; pos += 1; return str(v);
      case 0xda: need(2); v = view.getUint16(pos); pos += 2; return str(v);
      case 0xdb: need(4); v = view.getUint32(pos); pos += 4; return str(v);
      case 0xdc: need(2); v = view.getUint16(pos); pos += 2; return arr(v, depth);
      case 0xdd: need(4); v = view.getUint32(pos); pos += 4; return arr(v, depth);
      case 0xde: need(2); v = view.getUint16(pos); pos += 2; return map(v, depth);
      case 0xdf: need(4); v = view.getUint32(pos); pos += 4; return map(v, depth);
      default: throw new MsgpackError(`unsupported MessagePack type 0x${t.toString(16)}`);
    }
  }
  const out = value(0);
  if (pos !== bytes.length) throw new MsgpackError("trailing bytes after MessagePack value");
  return out;
}

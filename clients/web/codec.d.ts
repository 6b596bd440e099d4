// TypeScript declarations for codec.js (the garment stream decoder, format v1).
export declare const FORMAT_VERSION: 1;
export declare const FRAME_HEADER_LEN: 40;

/** Refused input; `code` is one of "empty", "truncated", "trailing-bytes", "bad-magic",
 * "unsupported-version", "bad-kind", "too-large", "mismatch", "invalid", "corrupt",
 * "wrong-setup", "missing-reference", "checksum". */
export declare class CodecError extends Error {
  readonly code: string;
}

export declare class GarmentSetup {
  static parse(bytes: Uint8Array | ArrayBuffer): GarmentSetup;
  readonly step: number;
  readonly vertexCount: number;
  readonly bones: number;
  readonly triangles: Uint32Array;
  /** Whether the setup carries the garment's rest shape (format v5), which keyframes are predicted from. */
  readonly hasRest: boolean;
  /** The rest shape, 3 × vertices lattice steps (multiply by `step` for metres); all zero without one. */
  readonly rest: Int32Array;
  readonly id: number;
}

export interface FrameHeader {
  kind: "key" | "delta";
  setupId: number;
  streamId: number;
  frame: number;
  reference: number;
  vertices: number;
  bones: number;
  checksum: number;
  payloadLen: number;
}

export declare class GarmentDecoder {
  constructor(setup: GarmentSetup);
  /** Decodes a frame into `out` (3 × vertices floats); throws CodecError and then changes nothing. */
  decode(bytes: Uint8Array | ArrayBuffer, out: Float32Array): FrameHeader;
  reset(): void;
}

export declare function parseFrameHeader(bytes: Uint8Array | ArrayBuffer): FrameHeader;
export declare function maxFrameBytes(vertices: number, bones: number): number;
export declare function wordHash(words: Iterable<number>): number;

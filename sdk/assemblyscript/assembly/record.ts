import { Bytes } from "./bytes";

/**
 * Record is one element of a stream: a value, and optionally a key and a
 * time (milliseconds since the Unix epoch).
 *
 * A Record handed to your function is valid during that call only: its key
 * and value point into a buffer the SDK reuses. A Record you return or emit
 * is copied by the SDK right away, so you may reuse one Record object (and
 * its Bytes) for every call.
 */
export class Record {
  key: Bytes = new Bytes();
  value: Bytes = new Bytes();
  hasKey: bool = false;
  hasTime: bool = false;
  time: i64 = 0;

  /** A record with value v (and no key or time). */
  static ofValue(v: Bytes): Record {
    const r = new Record();
    r.value = v;
    return r;
  }

  /** A record with key k and value v. */
  static ofKeyValue(k: Bytes, v: Bytes): Record {
    const r = new Record();
    r.key = k;
    r.hasKey = true;
    r.value = v;
    return r;
  }

  /** Copies the fields (not the bytes) of o into this record. */
  @inline assign(o: Record): Record {
    this.key.set(o.key.ptr, o.key.length);
    this.value.set(o.value.ptr, o.value.length);
    this.hasKey = o.hasKey;
    this.hasTime = o.hasTime;
    this.time = o.time;
    return this;
  }
}

// Package statecodec is the snapshot format of a task's host-managed state:
// keyed state and timers by key group, and operator state. [Encoder] writes
// a snapshot from whatever holds the entries (straight from the store's
// maps, without copying them); [Decode] reads one back, checking it fully,
// so a restore can refuse a bad snapshot before it changes anything.
//
// Keys and values are opaque bytes here, except that a timer key starts
// with the timer's u32 vertex and i64 time ([TimerKeyMin]). The store that
// merges a decoded snapshot, and the meaning of its keys, stay in wasmhost.
//
// It must not import wasmhost, wazero, or any package of the project: it is
// bytes to entries and back, and decodes what a blob store hands it, so any
// input gives an error rather than a panic.
package statecodec

// Package benchfn holds the function the ABI benchmark runs both inside a
// guest and natively, so the two sides do the same work.
package benchfn

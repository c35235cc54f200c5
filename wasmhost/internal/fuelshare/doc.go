// Package fuelshare decides which guests may run on: weighted fair sharing
// of fuel (the checks a guest runs at loop headers and function entries)
// among the tenants whose guests are running, with an optional fuel rate
// cap per tenant.
//
// It is pure: events in (a guest of a tenant starts or stops running guest
// code, a guest spent fuel), decisions out (may a guest of a tenant go on,
// and if not, when to ask again). It keeps no clock, starts no goroutine
// and takes no lock; wasmhost calls it under its own lock at every fuel
// trip and blocks the guest there while the answer is no.
//
// Each tenant has a virtual time: the fuel its guests spent divided by its
// weight. A guest may go on while its tenant's virtual time is at most Lag
// ahead of the slowest other tenant that is running, so busy tenants'
// fuel stays in the ratio of their weights; a tenant alone is never held
// (work-conserving). A tenant that starts running again after a pause
// starts from the slowest running tenant's virtual time, so it cannot bank
// the time it was idle. A rate cap is a token bucket of fuel. Optionally
// (Config.LongCall) the fuel of a long call is charged several times to
// its tenant's virtual time, so a guest that does not return gets a small
// part of the CPU beside tenants whose calls return.
//
// It must not import wazero, wasmhost or its other internal packages.
package fuelshare

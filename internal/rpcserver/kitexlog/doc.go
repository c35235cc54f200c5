// Package kitexlog routes Kitex's logs (klog) into a process's log/slog
// logger: each Kitex level maps to a slog level (its info lines, which
// restate Sluice's own, to debug), the retry notes Kitex
// writes for every attempt of a failed call are debug lines (the caller
// logs or returns the call's one error), and a message that repeats within
// a window is written once, the next line saying how many were left out.
//
// Kitex's logger is process-wide (klog is a package variable), the one
// global Sluice sets: Install sets it once per process and later calls
// only change where it writes. It is called from cmd/sluice's main and by
// local.Start. It imports only klog and the standard library.
package kitexlog

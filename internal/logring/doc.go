// Package logring keeps the recent lines of a log in a bounded buffer: a
// Ring holds at most a number of lines and of bytes, dropping the oldest,
// and numbers every line so a reader can poll for what is new and learn
// how many lines it missed. Handler is a log/slog handler that writes each
// record into a Ring and passes it on to another handler.
//
// TaskManagers keep one Ring per task (its guest's log output and the
// host's events of the task) and one for their own log; the lines are
// control.LogLine values. It imports the standard library and
// internal/control only.
package logring

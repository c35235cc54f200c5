// Package jobconfig names the job configuration keys that more than one
// floor of Sluice reads: the client sets them, the Dispatcher validates them.
//
// It imports only the standard library.
package jobconfig

// Package drivertest holds a resourcemanager.Driver for tests: it starts
// nothing, records what it is asked, can be told to fail, and can report a
// TaskManager terminated (Nomad's mock driver plays the same part).
package drivertest

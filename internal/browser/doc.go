// Package browser finds the headless Chromium the dashboard tests drive
// (Debian's chromium package) and holds the flags they start it with, so
// the test command (internal/check) and the tests agree on both. It does
// not drive the browser itself: the tests do, with chromedp, which this
// package does not import, so the test command does not build it.
package browser

// Package web is the JobManager's dashboard: hand-written HTML, CSS and
// JavaScript embedded in the binary, so it works with no network at run
// time and needs no build step. The page calls the REST API of package
// jm/rest with fetch and draws everything itself (the job graph is an SVG
// it lays out); this package only serves the files, under [Prefix].
//
// What the server sends (job and operator names, guest stack traces) reaches
// the page as text only: the script never parses server data as HTML, and
// the Content-Security-Policy of every answer forbids inline and foreign
// scripts, so a hostile job name cannot run code in an operator's browser.
//
// It imports only the standard library.
package web

package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/browser"
	"github.com/sluicehq/sluice/internal/testutil"
)

// tab is one headless Chromium tab of a test. Its methods fail the test
// on an error. Every uncaught exception, console error and Content
// Security Policy violation of the page is kept, and the test fails on any
// at its end: a dashboard that throws is broken even when the DOM looks
// right.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

// watch is evaluated in every document before its own scripts: CSP
// violations are not exceptions, so the page would hide them.
const watch = `window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`

// openTab starts a headless Chromium for the test, with a fresh profile,
// closed when the test ends. Without a working Chromium the test skips,
// unless SLUICE_REQUIRE_CHROMIUM=1, when it fails.
func openTab(t *testing.T) *tab {
	t.Helper()
	bin, err := browser.Find()
	if err != nil {
		if browser.Required() {
			t.Fatalf("%s=1 but: %v", browser.RequireEnv, err)
		}
		t.Skipf("no browser: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(bin), chromedp.WindowSize(1280, 900)}
	for _, f := range browser.Flags(t.TempDir()) {
		name, val, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if ok {
			opts = append(opts, chromedp.Flag(name, val))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	tb := &tab{t: t, ctx: ctx}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Listen(ctx, tb.event); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watch})
		return err
	})); err != nil {
		t.Fatalf("chromium: install the page watch: %v", err)
	}
	t.Cleanup(tb.checkProblems)
	return tb
}

func (tb *tab) event(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var parts []string
		for _, a := range e.Args {
			parts = append(parts, string(a.Value))
		}
		msg = "console error: " + strings.Join(parts, " ")
	default:
		return
	}
	tb.mu.Lock()
	tb.problems = append(tb.problems, msg)
	tb.mu.Unlock()
}

func (tb *tab) checkProblems() {
	var csp []string
	if tb.ctx.Err() == nil {
		if err := tb.try(`window.__csp || []`, &csp); err != nil {
			tb.t.Logf("read CSP violations: %v", err)
		}
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.problems {
		tb.t.Errorf("page: %s", p)
	}
	for _, v := range csp {
		tb.t.Errorf("page: content security policy violation: %s", v)
	}
}

// open loads url and waits until the dashboard has drawn its first view.
func (tb *tab) open(url string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		tb.t.Fatalf("open %s: %v", url, err)
	}
	tb.waitJS(30*time.Second, `document.getElementById('main').dataset.rendered ? '' : 'not rendered yet'`)
}

// goTo shows the dashboard's view hash (as "#/jobs/ID") and waits until it
// has been drawn once.
func (tb *tab) goTo(hash string) {
	tb.t.Helper()
	js, _ := json.Marshal(hash)
	tb.eval(fmt.Sprintf(`location.hash = %s; ''`, js), nil)
	// location.hash is the encoded form, as the page records it.
	tb.waitJS(30*time.Second, `document.getElementById('main').dataset.route === location.hash ? '' : 'still on ' + document.getElementById('main').dataset.route`)
}

// try evaluates js and decodes its value into out (nil: ignore it).
func (tb *tab) try(js string, out any) error {
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](js))
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// eval is try failing the test.
func (tb *tab) eval(js string, out any) {
	tb.t.Helper()
	if err := tb.try(js, out); err != nil {
		tb.t.Fatalf("evaluate %s: %v", js, err)
	}
}

// waitJS polls the expression js, which yields "" once what the test
// waits for holds and otherwise says what is missing.
func (tb *tab) waitJS(timeout time.Duration, js string) {
	tb.t.Helper()
	testutil.CheckFor(tb.t, timeout, 50*time.Millisecond, func() error {
		var why string
		if err := tb.try(js, &why); err != nil {
			return err
		}
		if why != "" {
			return errors.New(why)
		}
		return nil
	})
}

// text returns the text content of the element selector names, or "" if
// none.
func (tb *tab) text(selector string) string {
	tb.t.Helper()
	var s string
	js, _ := json.Marshal(selector)
	tb.eval(fmt.Sprintf(`(document.querySelector(%s) || {}).textContent || ''`, js), &s)
	return s
}

// click clicks the element selector names.
func (tb *tab) click(selector string) {
	tb.t.Helper()
	js, _ := json.Marshal(selector)
	var ok bool
	tb.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e || e.disabled) return false; e.click(); return true; })()`, js), &ok)
	if !ok {
		tb.t.Fatalf("click %s: no such element, or disabled", selector)
	}
}

// screenshot saves a PNG of the whole page as dir/name.png.
func (tb *tab) screenshot(dir, name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s (%d bytes)", p, len(png))
}

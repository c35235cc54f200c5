package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/sdk/client"
)

type runFlags struct {
	jm       string
	local    bool
	p        int
	detached bool
	blobURL  string
	name     string
	tms      int
	slots    int
	progress string
	tenant   string
	config   []string
	secrets  []string // NAME=FILE
	// fromSavepoint or fromCheckpoint start the job from a savepoint or a
	// retained checkpoint; checkpointInterval sets its periodic
	// checkpoints.
	fromSavepoint      string
	fromCheckpoint     string
	checkpointInterval time.Duration
	// wasmOpt is the wasm-opt level a Go source directory is optimized at
	// ("": none).
	wasmOpt string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [--jm ADDR | --local] [-p N] [--detached] MODULE_OR_SOURCE_DIR [-- ARGS]",
		Short: "Run a job: build or read the module, upload it and its inputs, submit, print the results",
		Long: `Run a job on a cluster (--jm, or $SLUICE_JM) or on an embedded cluster started
for this run only (--local, the default when no JobManager is named).

MODULE_OR_SOURCE_DIR is a .wasm module, or a directory built into one (cached):
a Go package using the guest SDK (for wasip1), or C files written against
docs/ABI.md (with clang for wasm32-wasi). ARGS after -- go to the job unchanged;
a local file, directory or glob named after --input is uploaded to the blob
store (content addressed, so only once) and the job's "inputs" config maps
the path to its blob key, where the job's text source reads it. On a remote
cluster, --blob names the cluster's store; paths that are not local files are
read as blob keys of the tenant.

The job's collected records go to stdout, one per line, as the job releases
them: when a completed checkpoint covers them (so an unbounded job's appear
while it runs, given --checkpoint-interval), and the rest when it finishes; a
job without checkpoints that runs 10s without a record says so on stderr.
Progress and logs go to stderr. The exit code is 0 only when the job FINISHED. Interrupting an
attached run cancels the job.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := args[0]
			jobArgs := args[1:]
			if n := cmd.ArgsLenAtDash(); n > 1 {
				return usageErr(fmt.Errorf("one module or package before --, got %d: %q", n, args[:n]))
			} else if n < 0 && len(args) > 1 {
				return usageErr(fmt.Errorf("job arguments go after --: sluice run %s -- %s", target, strings.Join(args[1:], " ")))
			}
			return runJob(cmd, f, target, jobArgs)
		},
	}
	fl := cmd.Flags()
	jmFlag(cmd, &f.jm)
	tokenFlag(cmd)
	fl.BoolVar(&f.local, "local", false, "start an embedded cluster for this run only")
	fl.IntVarP(&f.p, "parallelism", "p", 1, "default parallelism of the job's operators")
	fl.BoolVar(&f.detached, "detached", false, "print the job id and return without waiting (not with --local)")
	fl.StringVar(&f.blobURL, "blob", os.Getenv(envBlob), "the cluster's blob store URL, where local --input files are uploaded (default $"+envBlob+", else the same default directory as sluice jm and tm)")
	fl.StringVar(&f.name, "name", "", "job name (default: the name the module gives its graph)")
	fl.IntVar(&f.tms, "task-managers", 1, "with --local: number of TaskManagers")
	fl.IntVar(&f.slots, "slots", 0, "with --local: slots per TaskManager (default: enough for -p)")
	fl.StringVar(&f.progress, "progress", "auto", "progress line on stderr: auto (when stderr is a terminal), always, never")
	fl.StringArrayVarP(&f.config, "config", "C", nil, "job config KEY=VALUE (repeatable), e.g. -C restart-strategy.fixed-delay.attempts=3")
	fl.StringArrayVar(&f.secrets, "job-secret", nil, "job secret NAME=FILE (repeatable): the file's content, without its final newline, is the secret a connector setting names as secret:NAME (sets secret.NAME, kept out of logs and job details)")
	fl.StringVar(&f.fromSavepoint, "from-savepoint", "", "start the job from this savepoint id (at any parallelism)")
	fl.StringVar(&f.fromCheckpoint, "from-checkpoint", "", "start the job from this retained checkpoint, JOB/N as sluice checkpoints JOB lists it (at any parallelism)")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", 0, "take a checkpoint this often, e.g. 1s (sets execution.checkpointing.interval; 0: off)")
	wasmOptFlag(cmd, &f.wasmOpt)
	fl.StringVar(&f.tenant, "tenant", client.DefaultTenant, "tenant whose blob prefix --input files are uploaded under (default: the --token's tenant, as the JobManager says)")
	return cmd
}

func runJob(cmd *cobra.Command, f runFlags, target string, jobArgs []string) error {
	log, err := logger(cmd, slog.LevelWarn)
	if err != nil {
		return err
	}
	if f.p < 1 {
		return usageErr(fmt.Errorf("-p %d: parallelism must be at least 1", f.p))
	}
	if f.local && f.detached {
		return usageErr(errors.New("--detached needs a cluster that outlives this command: use --jm, or run `sluice local` first"))
	}
	if !f.local && f.jm == "" {
		if f.detached {
			return usageErr(errors.New("--detached needs a cluster: pass --jm HOST:PORT or set " + envJM))
		}
		log.Info("no --jm and no " + envJM + ": running on an embedded cluster (--local)")
		f.local = true
	}
	config := map[string]string{}
	for _, kv := range f.config {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr(fmt.Errorf("--config %q: want KEY=VALUE", kv))
		}
		config[k] = v
	}
	if err := readJobSecrets(f.secrets, config); err != nil {
		return usageErr(err)
	}
	if f.fromSavepoint != "" && f.fromCheckpoint != "" {
		return usageErr(errors.New("--from-savepoint and --from-checkpoint: start from one of them"))
	}
	if f.checkpointInterval < 0 {
		return usageErr(fmt.Errorf("--checkpoint-interval %v: must not be negative", f.checkpointInterval))
	}
	if f.checkpointInterval > 0 {
		config[jobconfig.KeyCheckpointInterval] = f.checkpointInterval.String()
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	stderr := cmd.ErrOrStderr()

	wasm, err := loadModule(ctx, target, f.wasmOpt, stderr)
	if err != nil {
		return err
	}

	var (
		cl    *client.Client
		store blob.Store
	)
	if f.local {
		slots := f.slots
		if slots <= 0 {
			slots = max(local.DefaultSlots, (f.p+f.tms-1)/f.tms)
		}
		c, err := local.Start(ctx, local.Config{TaskManagers: f.tms, Slots: slots, CacheDir: defaultDir("cache"), BlobURL: f.blobURL, Logger: log})
		if err != nil {
			return err
		}
		defer c.Close()
		store = c.Blob()
		if cl, err = c.Client(); err != nil {
			return err
		}
	} else {
		if cl, err = dial(cmd, f.jm); err != nil {
			return err
		}
		if client.HasLocalInputs(jobArgs) {
			if f.blobURL == "" {
				log.Info("uploading --input files to the default blob store; pass --blob (or set " + envBlob + ") if the cluster uses another")
			}
			if store, err = openBlob(ctx, f.blobURL); err != nil {
				return err
			}
			defer store.Close()
		}
	}
	if store != nil {
		if !cmd.Flags().Changed("tenant") && !f.local {
			// The token decides the tenant: ask the JobManager which it is.
			ov, err := cl.Overview(ctx)
			if err != nil {
				return err
			}
			if ov.Tenant != "" {
				f.tenant = ov.Tenant
			}
		}
		inputs, err := client.StageInputs(ctx, store, f.tenant, jobArgs)
		if err != nil {
			return err
		}
		config = client.InputsConfig(config, inputs)
	}

	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		return err
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: jobArgs, Parallelism: f.p, Name: f.name, Config: config,
		FromSavepoint: f.fromSavepoint, FromCheckpoint: f.fromCheckpoint})
	if err != nil {
		return err
	}
	if f.detached {
		fmt.Fprintln(cmd.OutOrStdout(), id)
		return nil
	}
	log.Info("job submitted", "job", id, "module", digest)

	showProgress := f.progress == "always" || (f.progress == "auto" && isTerminal(stderr))
	out := &recordPrinter{w: bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10), stderr: stderr}
	// A job without checkpoints releases its records only when it ends:
	// say so once if it runs a while without printing any.
	quietHint := ""
	if c, err := jobconfig.Parse(config); err == nil && !c.Checkpoints.Enabled() {
		quietHint = "no records yet: job " + id + " has no checkpoints, so its collected records are released when it ends; to see an unbounded job's records while it runs, give it --checkpoint-interval (e.g. 1s)"
	}
	res, err := waitWithProgress(ctx, cl, id, stderr, showProgress, log, out, quietHint)
	if err != nil {
		return err
	}
	return finish(stderr, res, out)
}

// loadModule reads a .wasm file, or builds a source directory, optimizing a
// Go guest with wasm-opt at wasmOpt when it is not "".
func loadModule(ctx context.Context, target, wasmOpt string, stderr io.Writer) ([]byte, error) {
	st, err := os.Stat(target)
	if err != nil {
		return nil, usageErr(fmt.Errorf("module %s: %w", target, err))
	}
	if !st.IsDir() {
		if wasmOpt != "" {
			return nil, usageErr(fmt.Errorf("--wasm-opt optimizes a Go guest as it is built, and %s is a module file: pass the guest's source directory", target))
		}
		b, err := os.ReadFile(target)
		if err != nil {
			return nil, fmt.Errorf("read module: %w", err)
		}
		return b, nil
	}
	start := time.Now()
	path, err := guestbuild.BuildWith(ctx, target, guestbuild.Options{WasmOpt: wasmOpt})
	if err != nil {
		return nil, fmt.Errorf("build %s for wasip1: %w", target, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read built module: %w", err)
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(stderr, "built %s in %v\n", target, d.Round(100*time.Millisecond))
	}
	return b, nil
}

// wasmOptFlag adds --wasm-opt[=LEVEL] to cmd: off unless given, and
// guestbuild.DefaultWasmOptLevel when given without a level.
func wasmOptFlag(cmd *cobra.Command, level *string) {
	cmd.Flags().StringVar(level, "wasm-opt", "", fmt.Sprintf(
		"optimize a Go guest with Binaryen's wasm-opt as it is built (Debian package %s), at `LEVEL`: one of %s (--wasm-opt alone: %s); off by default, see docs/RATIONALE.md",
		guestbuild.WasmOptDebianPackages, strings.Join(guestbuild.WasmOptLevels(), ", "), guestbuild.DefaultWasmOptLevel))
	cmd.Flags().Lookup("wasm-opt").NoOptDefVal = guestbuild.DefaultWasmOptLevel
}

// quietAfter is how long a running job goes without a record before
// waitWithProgress prints its quiet hint.
const quietAfter = 10 * time.Second

// waitWithProgress long-polls the job until it ends, printing its records
// to out as the job releases them (as checkpoints complete; all at the end
// for a job without checkpoints). On a terminal it keeps one status line up
// to date; on interrupt it cancels the job and waits for it to end. When
// quietHint is not "", it goes to stderr once the job has run quietAfter
// without a record.
func waitWithProgress(ctx context.Context, cl *client.Client, id string, stderr io.Writer, show bool, log *slog.Logger, out *recordPrinter, quietHint string) (client.JobResult, error) {
	poll := 10 * time.Second
	if quietHint != "" {
		poll = quietAfter / 2
	}
	if show {
		poll = 500 * time.Millisecond
	}
	start := time.Now()
	lastState := ""
	canceled := false
	clearLine := func() {
		if show {
			fmt.Fprint(stderr, "\r\033[K")
		}
	}
	// cancelJob runs once, on the first interrupt; the loop then waits for
	// the job to end CANCELED, on a context of its own.
	waitCtx, stopWait := context.Background(), context.CancelFunc(func() {})
	defer func() { stopWait() }()
	cancelJob := func() error {
		canceled = true
		// A second interrupt stops the waiting.
		waitCtx, stopWait = signalContext(context.Background())
		clearLine()
		fmt.Fprintf(stderr, "interrupted: canceling job %s (interrupt again to stop waiting)\n", id)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.CancelJob(cctx, id); err != nil {
			return fmt.Errorf("cancel job %s: %w", id, err)
		}
		return nil
	}
	for {
		pctx := ctx
		if canceled {
			pctx = waitCtx
		}
		r, err := cl.PollRecords(pctx, id, out.next, poll)
		switch {
		case err != nil && ctx.Err() != nil && !canceled:
			if err := cancelJob(); err != nil {
				return client.JobResult{}, err
			}
			continue
		case err != nil && canceled && waitCtx.Err() != nil:
			return client.JobResult{}, fmt.Errorf("stopped waiting for job %s to cancel", id)
		case err != nil && (errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrDeadlineExceeded)):
			log.Warn("job manager not answering; retrying", "err", err)
			time.Sleep(500 * time.Millisecond)
			continue
		case err != nil:
			clearLine()
			return client.JobResult{}, err
		}
		if r.State != lastState {
			log.Info("job state", "job", id, "state", r.State)
			lastState = r.State
		}
		if len(r.Records) > 0 {
			clearLine()
			if err := out.print(r); err != nil {
				return client.JobResult{}, err
			}
		}
		if client.Terminal(r.State) && out.next >= r.RecordsTotal {
			clearLine()
			return r, nil
		}
		if client.Terminal(r.State) {
			continue // more records than one answer carries
		}
		if quietHint != "" && out.next == 0 && r.State == "RUNNING" && time.Since(start) >= quietAfter {
			clearLine()
			fmt.Fprintln(stderr, quietHint)
			quietHint = ""
		}
		if show {
			fmt.Fprintf(stderr, "\r\033[K%s", progressLine(r, time.Since(start)))
		}
		if ctx.Err() != nil && !canceled {
			if err := cancelJob(); err != nil {
				return client.JobResult{}, err
			}
		}
	}
}

// progressLine is one line: job, state, subtask counts by state, elapsed.
func progressLine(r client.JobResult, elapsed time.Duration) string {
	counts := map[string]int{}
	total := 0
	for _, v := range r.Vertices {
		for _, s := range v.Subtasks {
			counts[s.State]++
			total++
		}
	}
	var parts []string
	for _, s := range []string{"CREATED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED"} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], strings.ToLower(s)))
		}
	}
	tasks := ""
	if total > 0 {
		tasks = fmt.Sprintf("  subtasks: %s", strings.Join(parts, ", "))
	}
	hint := ""
	if counts["CREATED"] > 0 && elapsed > 3*time.Second {
		hint = "  (waiting for slots)"
	}
	return fmt.Sprintf("job %s  %s%s%s  %s", r.ID, r.State, tasks, hint, elapsed.Round(100*time.Millisecond))
}

// recordPrinter writes a job's records to stdout, one per line, as they
// arrive.
type recordPrinter struct {
	w       *bufio.Writer
	stderr  io.Writer
	next    int64 // the index of the next record to print
	printed int64
	dropped int64
}

func (p *recordPrinter) print(r client.JobResult) error {
	if r.RecordsOffset > p.next {
		// The JobManager keeps only its newest records.
		fmt.Fprintf(p.stderr, "warning: %d records were dropped before they could be printed (the JobManager keeps only the newest): write large results with a file sink\n",
			r.RecordsOffset-p.next)
		p.dropped += r.RecordsOffset - p.next
	}
	for _, rec := range r.Records {
		p.w.Write(rec)
		p.w.WriteByte('\n')
	}
	p.next = r.RecordsOffset + int64(len(r.Records))
	p.printed += int64(len(r.Records))
	return p.w.Flush()
}

// finish reports how the job ended on stderr, and sets the exit code; its
// records are on stdout already.
func finish(stderr io.Writer, r client.JobResult, out *recordPrinter) error {
	if r.State != client.StateFinished {
		msg := fmt.Sprintf("job %s %s", r.ID, r.State)
		if out.printed > 0 {
			msg += fmt.Sprintf(" (after %d records, each covered by a completed checkpoint)", out.printed)
		}
		if r.Failure != "" {
			msg += ":\n" + safeText(r.Failure)
		}
		return &exitError{code: exitFailed, err: errors.New(msg)}
	}
	fmt.Fprintf(stderr, "job %s FINISHED in %v: %d records", r.ID, r.Duration.Round(time.Millisecond), out.printed)
	if r.Restarts > 0 {
		fmt.Fprintf(stderr, " after %d restarts", r.Restarts)
	}
	fmt.Fprintln(stderr)
	printAccumulators(stderr, r.Accumulators)
	printHistory(stderr, r.History)
	return nil
}

// readJobSecrets sets config's secret.NAME for each --job-secret NAME=FILE
// to FILE's content without its final line end, so a secret need not be
// typed on a command line (where ps and shell history would show it).
func readJobSecrets(specs []string, config map[string]string) error {
	for _, spec := range specs {
		name, file, ok := strings.Cut(spec, "=")
		if !ok || name == "" || file == "" {
			return fmt.Errorf("--job-secret %q: want NAME=FILE, the file holding the secret", spec)
		}
		if why := jobgraph.BadSecretName(name); why != "" {
			return fmt.Errorf("--job-secret %s: the secret's name %s", spec, why)
		}
		key := jobconfig.KeySecretPrefix + name
		if _, dup := config[key]; dup {
			return fmt.Errorf("--job-secret %s: secret %q is already set (by --config %s or an earlier --job-secret): pass it once", name, name, key)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("--job-secret %s: %w", name, err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return fmt.Errorf("--job-secret %s: %s is empty: put the secret in it", name, file)
		}
		config[key] = v
	}
	return nil
}

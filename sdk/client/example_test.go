package client_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// Example runs the word count (examples/wordcount) on a small text: stage
// the input, upload the module, submit the job, wait for its result. The
// cluster here is an embedded one (package local) in this process; against
// a real one, only the JobManager address and the blob store differ.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dir, err := os.MkdirTemp("", "sluice-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// CacheDir keeps compiled modules across runs: compiling one takes seconds.
	cluster, err := local.Start(ctx, local.Config{Dir: dir, CacheDir: localtest.CompileCache(), Slots: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	cl, err := client.New(cluster.Addr())
	if err != nil {
		log.Fatal(err)
	}
	wasm, err := wordCountModule(ctx)
	if err != nil {
		log.Fatal(err)
	}

	input := filepath.Join(dir, "fox.txt")
	text := "The quick brown fox jumps over the lazy dog.\nThe dog barks; the fox runs.\n"
	if err := os.WriteFile(input, []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}
	args := []string{"--input", input}

	// The job reads its input from the cluster's blob store: upload the
	// local files its arguments name, and tell it where they went.
	inputs, err := client.StageInputs(ctx, cluster.Blob(), client.DefaultTenant, args)
	if err != nil {
		log.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		log.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{
		ModuleDigest: digest,
		Args:         args,
		Parallelism:  2,
		Config:       client.InputsConfig(nil, inputs),
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := cl.WaitJob(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.State, len(res.Records), "distinct words")

	// Collected records come in no particular order: sort them by count,
	// then by word, and print the top three.
	type count struct {
		word string
		n    int
	}
	var counts []count
	for _, r := range res.Records {
		word, n, _ := strings.Cut(string(r), "\t")
		c, _ := strconv.Atoi(n)
		counts = append(counts, count{word, c})
	}
	slices.SortFunc(counts, func(a, b count) int { return cmp.Or(b.n-a.n, strings.Compare(a.word, b.word)) })
	for _, c := range counts[:3] {
		fmt.Println(c.word, c.n)
	}
	// Output:
	// FINISHED 10 distinct words
	// the 4
	// dog 2
	// fox 2
}

// wordCountModule builds examples/wordcount for the cluster, as
// `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` does (sluice run
// does it for you); the build is cached across runs.
func wordCountModule(ctx context.Context) ([]byte, error) {
	path, err := guestbuild.Build(ctx, filepath.Join("..", "..", "examples", "wordcount"))
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

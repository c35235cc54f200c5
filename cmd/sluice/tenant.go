package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/bytedance/sonic"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/auth"
)

func newTenantCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Manage the tenants file of a JobManager (sluice jm --tenants FILE)",
	}
	cmd.AddCommand(newTenantAddCmd())
	return cmd
}

func newTenantAddCmd() *cobra.Command {
	var file string
	var q auth.Quotas
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Make a new token for tenant NAME; print it and the tenants-file entry",
		Long: `Make a new random token for tenant NAME (a DNS label). The token is printed
once on stdout ("token: slc_…"); only its SHA-256 goes into the tenants file.
With --file the entry is written into FILE (created if missing; an existing
tenant gets one more token and keeps its quotas); without it the JSON entry
to add under "tenants" is printed. Send the JobManager SIGHUP to load the file
(docs/OPERATIONS.md); no restart is needed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := blob.ValidateTenant(name); err != nil {
				return usageErr(err)
			}
			tok := auth.NewToken()
			entry := auth.Tenant{Name: name, TokenSHA256: []string{auth.HashToken(tok)}, Quotas: q}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "token: %s\n", tok)
			if file == "" {
				b, err := sonic.ConfigStd.MarshalIndent(entry, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "add to the tenants file under \"tenants\":\n%s\n", b)
				return nil
			}
			if err := addToFile(file, entry); err != nil {
				return err
			}
			fmt.Fprintf(out, "tenant %q written to %s; send the JobManager SIGHUP to load it (kill -HUP PID)\n", name, file)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "tenants file to write the entry into")
	cmd.Flags().IntVar(&q.Slots, "slots", 0, "quota: most slots in use at once (0: no limit)")
	cmd.Flags().IntVar(&q.RunningJobs, "running-jobs", 0, "quota: most jobs not yet ended (0: no limit)")
	cmd.Flags().IntVar(&q.SubmitsPerMinute, "submits-per-minute", 0, "quota: most jobs submitted per minute, a sixth of it at once (0: no limit)")
	cmd.Flags().Int64Var(&q.ModuleBytes, "module-bytes", 0, "quota: largest module in bytes (0: the cluster's limit)")
	cmd.Flags().Int64Var(&q.MemoryBytes, "memory-bytes", 0, "quota: Wasm memory per instance in bytes (0: the cluster's limit)")
	cmd.Flags().Int64Var(&q.CallTimeoutMs, "call-timeout-ms", 0, "quota: deadline of one guest call in ms (0: the cluster's)")
	cmd.Flags().Int64Var(&q.StateBytes, "state-bytes", 0, "quota: keyed and operator state per task in bytes (0: the cluster's)")
	cmd.Flags().IntVar(&q.CPUWeight, "cpu-weight", 0, "quota: CPU share against the other tenants on a TaskManager (0: 1)")
	cmd.Flags().Int64Var(&q.FuelPerSecond, "fuel-per-second", 0, "quota: fuel per second on a TaskManager, all the tenant's guests together (0: no cap)")
	cmd.Flags().Int64Var(&q.CallFuel, "call-fuel", 0, "quota: fuel limit of one guest call (0: none)")
	return cmd
}

// addToFile adds entry to the tenants file at path, creating it.
func addToFile(path string, entry auth.Tenant) error {
	var f auth.File
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if _, err := auth.ParseTenants(b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := sonic.ConfigStd.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	found := false
	for i := range f.Tenants {
		if f.Tenants[i].Name == entry.Name {
			f.Tenants[i].TokenSHA256 = append(f.Tenants[i].TokenSHA256, entry.TokenSHA256...)
			found = true
		}
	}
	if !found {
		f.Tenants = append(f.Tenants, entry)
	}
	out, err := sonic.ConfigStd.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

package main

import "github.com/spf13/cobra"

// commands lists every subcommand; each lives in its own file.
func commands() []*cobra.Command {
	return []*cobra.Command{
		newJMCmd(),
		newTMCmd(),
		newLocalCmd(),
		newRunCmd(),
		newPlanCmd(),
		newListCmd(),
		newStatusCmd(),
		newCancelCmd(),
		newStopCmd(),
		newSavepointCmd(),
		newCheckpointsCmd(),
		newOverviewCmd(),
		newTopCmd(),
		newLogsCmd(),
		newStackCmd(),
		newTenantCmd(),
	}
}

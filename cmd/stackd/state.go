package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stackd/stackd/state"
)

func newStateCommand() *cobra.Command {
	var (
		stateDir string
		stateKey stateKeyFlag
	)
	cmd := &cobra.Command{Use: "state", Short: "Inspect, check, back up and restore the state"}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", ".stackd/state", "Badger state directory")
	stateKey.add(cmd.PersistentFlags())
	check := &cobra.Command{
		Use:   "check",
		Short: "Check the state for inconsistencies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := stateKey.openExisting(stateDir)
			if err != nil {
				return err
			}
			defer st.Close()
			problems := st.Check()
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if len(problems) > 0 {
				return exitError{1}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "state is consistent")
			return nil
		},
	}
	var daemon daemonFlags
	backup := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a full backup of the state to FILE (0600, via a temporary file: the previous FILE survives any failure); online from the daemon holding the state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var info state.BackupInfo
			st, err := openUnlessServer(&daemon, &stateKey, stateDir)
			switch {
			case daemon.viaDaemon(err):
				// The daemon streams one consistent snapshot; it is
				// verified before it replaces FILE.
				client, where, cerr := daemon.client(stateDir)
				if cerr != nil {
					return cerr
				}
				key, kerr := stateKey.key()
				if kerr != nil {
					return kerr
				}
				info, err = state.SaveBackup(args[0], key, func(w io.Writer) error { return client.Backup(cmd.Context(), w) })
				if err != nil {
					return daemonError(where, err)
				}
			case err != nil:
				return err
			default:
				defer st.Close()
				if info, err = st.BackupFile(args[0]); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Backed up %s to %s (%s).\n", plural(int(info.Records), "record"), args[0], backupSummary(info))
			return nil
		},
	}
	var legacy bool
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Verify the backup in FILE, then restore it into a new or empty --state-dir",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := stateKey.key()
			if err != nil {
				return err
			}
			if stateKey.url.set() || stateKey.url.passwordFile != "" {
				if legacy {
					return fmt.Errorf("--legacy backups restore into a --state-dir only; restore there, back it up again, and restore that into --state-url")
				}
				info, err := stateKey.url.restore(args[0], key)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Restored %s from %s into %s (%s).\n", plural(int(info.Records), "record"), args[0], state.RedactDSN(stateKey.url.url), backupSummary(info))
				return nil
			}
			info, err := restoreBackup(stateDir, args[0], legacy, key)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Restored %s from %s into %s (%s).\n", plural(int(info.Records), "record"), args[0], stateDir, backupSummary(info))
			return nil
		},
	}
	restore.Flags().BoolVar(&legacy, "legacy", false, "FILE was written by an older stackd (Badger's raw format, no checksum): restore it without verification")
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check that FILE is a complete, intact backup (record count and checksum)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := stateKey.key()
			if err != nil {
				return err
			}
			info, err := verifyBackup(args[0], key)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is a complete backup: %s (%s).\n", args[0], plural(int(info.Records), "record"), backupSummary(info))
			return nil
		},
	}
	daemon.add(backup.Flags())
	cmd.AddCommand(check, backup, restore, verify)
	return cmd
}

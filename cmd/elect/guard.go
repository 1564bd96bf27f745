//go:build unix

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/electkit/election/internal/mono"
)

// The guard is the process between elect run and the command: elect
// starts itself again with guardArg as its first argument, as the leader
// of a new process group, and the guard starts the command in that group.
// It exists so that the command never outlives the leadership even when
// elect cannot act: stopped (SIGSTOP, or a debugger) past the lease, or
// killed with SIGKILL.
//
// It keeps the Term's deadline D, which elect sends after each renewal as
// a reading of CLOCK_MONOTONIC (shared by every process of the machine),
// and on its own:
//
//   - at D − grace − killMargin sends SIGTERM to the group;
//   - at D − killMargin sends SIGKILL to the group;
//   - on "stop" from elect, or when elect goes away (the control pipe's
//     end of file), sends SIGTERM at once and SIGKILL grace later, but
//     never after D − killMargin.
//
// When the command exits, the guard tells elect how, then kills what is
// left of the group (itself included). If the guard itself is killed, the
// kernel kills the command (Linux: the parent-death signal, set from a
// thread locked for the guard's whole life) and elect kills the group.
//
// Protocol, one line each. elect → guard on fd 3: "deadline <mono ns>",
// "stop". guard → elect on fd 4: "started <pid>", "error <message>",
// "exit <code> <stopping>", "signal <number> <stopping>", and "killed 9 1"
// just before the guard's own SIGKILL of the group; stopping is 1
// when the guard had begun to stop the command, 0 when it ended on its own.
const guardArg = "__elect-guard"

// errTooLate is the guard's error when the deadline is too close to start
// the command at all.
const errTooLate = "too late: the leadership would end before the command had its grace period"

// isGuard reports whether the process was started as a guard.
func isGuard(args []string) bool { return len(args) > 1 && args[1] == guardArg }

// stopSchedule returns when the command must get SIGTERM and SIGKILL for a
// Term with deadline d: termAt = d − grace − killMargin, killAt =
// d − killMargin. If the stop is asked for at now (elect's decision, a
// signal, elect gone), SIGTERM is at once and SIGKILL at now + grace,
// but never later than d − killMargin: the command is dead before the
// Term can end, so before any other candidate can lead.
func stopSchedule(d time.Time, grace time.Duration, stopAt time.Time) (termAt, killAt time.Time) {
	killAt = d.Add(-killMargin)
	termAt = killAt.Add(-grace)
	if !stopAt.IsZero() {
		if stopAt.Before(termAt) {
			termAt = stopAt
		}
		if k := stopAt.Add(grace); k.Before(killAt) {
			killAt = k
		}
	}
	return termAt, killAt
}

// guardMain is the guard: args are guardArg, grace (ns), the first
// deadline (CLOCK_MONOTONIC ns), "--", the command and its arguments.
func guardMain(args []string) int {
	// Pdeathsig fires when the thread that started the child exits: this
	// goroutine keeps its thread until the process exits.
	runtime.LockOSThread()
	ctl := os.NewFile(3, "control")
	status := os.NewFile(4, "status")
	if ctl == nil || status == nil || len(args) < 6 || args[4] != "--" {
		fmt.Fprintln(os.Stderr, "elect: the guard is started by elect run, not by hand")
		return exitUsage
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	say := func(format string, a ...any) { fmt.Fprintf(status, format+"\n", a...) }
	grace, err1 := strconv.ParseInt(args[2], 10, 64)
	first, err2 := strconv.ParseInt(args[3], 10, 64)
	if err1 != nil || err2 != nil {
		say("error bad guard arguments %q", args[2:4])
		return exitUsage
	}
	// The group's SIGTERM reaches the guard too: it must outlive it to send
	// the SIGKILL. Caught, not ignored: an ignored signal would stay
	// ignored in the command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	deadline := mono.Time(first)
	termAt, killAt := stopSchedule(deadline, time.Duration(grace), time.Time{})
	if !time.Now().Before(termAt) {
		say("error %s", errTooLate)
		return exitFailure
	}
	cmd := exec.Command(args[5], args[6:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		say("error %v", err)
		return exitFailure
	}
	say("started %d", cmd.Process.Pid)
	pgid := os.Getpid()
	group := func(sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	msgs := make(chan string)
	go func() {
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			msgs <- sc.Text()
		}
		close(msgs)
	}()

	stopping := false
	stop := func(at time.Time) {
		if stopping {
			return
		}
		stopping = true
		_, killAt = stopSchedule(deadline, time.Duration(grace), at)
		group(syscall.SIGTERM)
	}
	termTimer := time.NewTimer(time.Until(termAt))
	killTimer := time.NewTimer(time.Until(killAt))
	for {
		select {
		case m, ok := <-msgs:
			switch {
			case !ok:
				msgs = nil // elect is gone
				stop(time.Now())
			case m == "stop":
				stop(time.Now())
			case strings.HasPrefix(m, "deadline "):
				ns, err := strconv.ParseInt(strings.TrimPrefix(m, "deadline "), 10, 64)
				if err != nil || stopping {
					continue
				}
				if d := mono.Time(ns); d.After(deadline) {
					deadline = d
					termAt, killAt = stopSchedule(deadline, time.Duration(grace), time.Time{})
					termTimer.Reset(time.Until(termAt))
				}
			}
			killTimer.Reset(time.Until(killAt))
		case <-termTimer.C:
			stop(time.Time{})
			killTimer.Reset(time.Until(killAt))
		case <-killTimer.C:
			say("killed %d 1", int(syscall.SIGKILL))
			group(syscall.SIGKILL) // the guard too
		case <-exited:
			flag := 0
			if stopping {
				flag = 1
			}
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				say("signal %d %d", int(ws.Signal()), flag)
			} else {
				say("exit %d %d", ws.ExitStatus(), flag)
			}
			group(syscall.SIGKILL) // what the command left in its group, and the guard
			return exitFailure
		}
	}
}

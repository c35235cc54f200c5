package rest

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

type configBody struct {
	RefreshInterval int64           `json:"refresh-interval"`
	Version         string          `json:"sluice-version"`
	Timezone        string          `json:"timezone-name"`
	TimezoneOffset  int64           `json:"timezone-offset"`
	Features        map[string]bool `json:"features"`
}

// getConfig is GET /config: what the dashboard needs to start.
func (s *Server) getConfig(ctx context.Context, r *request) (int, any, error) {
	now := s.cfg.Now()
	zone, offset := now.Zone()
	return http.StatusOK, configBody{
		RefreshInterval: s.cfg.RefreshInterval.Milliseconds(),
		Version:         s.cfg.Version,
		Timezone:        zone,
		TimezoneOffset:  int64(offset) * 1000,
		Features: map[string]bool{
			"web-submit":    true, // modules upload and run
			"web-cancel":    true,
			"web-rescale":   true,
			"web-dashboard": s.cfg.Web != nil,
		},
	}, nil
}

type overviewBody struct {
	TaskManagers   int    `json:"taskmanagers"`
	SlotsTotal     int    `json:"slots-total"`
	SlotsAvailable int    `json:"slots-available"`
	JobsRunning    int    `json:"jobs-running"`
	JobsFinished   int    `json:"jobs-finished"`
	JobsCancelled  int    `json:"jobs-cancelled"`
	JobsFailed     int    `json:"jobs-failed"`
	JobsSuspended  int    `json:"jobs-suspended"`
	Version        string `json:"sluice-version"`
	Tenant         string `json:"tenant"`
}

// getOverview is GET /overview: the cluster and the tenant's jobs by state
// (every state not ended counts as running, as Flink's).
func (s *Server) getOverview(ctx context.Context, r *request) (int, any, error) {
	o := s.cfg.Dispatcher.Overview(ctx, r.tenant)
	b := overviewBody{TaskManagers: len(o.TaskManagers), SlotsTotal: o.SlotsTotal, SlotsAvailable: o.SlotsFree, Version: s.cfg.Version, Tenant: r.tenant}
	for st, n := range o.JobsByState {
		switch st {
		case jobmaster.Finished:
			b.JobsFinished += n
		case jobmaster.Canceled:
			b.JobsCancelled += n
		case jobmaster.Failed:
			b.JobsFailed += n
		case jobmaster.Suspended:
			b.JobsSuspended += n
		default:
			b.JobsRunning += n
		}
	}
	return http.StatusOK, b, nil
}

type hardwareBody struct {
	CPUCores       int   `json:"cpuCores"`
	PhysicalMemory int64 `json:"physicalMemory"`
}

type taskManagerBody struct {
	ID          string `json:"id"`
	Path        string `json:"path"`
	DataPort    int    `json:"dataPort"`
	DataAddress string `json:"dataAddress"`
	// Flink's name; its value is the time of the last heartbeat (Unix ms),
	// as Flink's is.
	LastHeartbeat int64        `json:"timeSinceLastHeartbeat"`
	Slots         int          `json:"slotsNumber"`
	FreeSlots     int          `json:"freeSlots"`
	Hardware      hardwareBody `json:"hardware"`
}

type taskManagerDetailBody struct {
	taskManagerBody
	Metrics taskManagerMetrics `json:"metrics"`
}

// taskManagerMetrics is what the JobManager knows of a TaskManager from its
// registration and slot reports.
type taskManagerMetrics struct {
	SlotsTotal     int   `json:"slotsTotal"`
	SlotsFree      int   `json:"slotsFree"`
	CPUCores       int   `json:"cpuCores"`
	PhysicalMemory int64 `json:"physicalMemory"`
}

func taskManagerOf(t resourcemanager.TaskManagerInfo) taskManagerBody {
	port := 0
	if _, p, err := net.SplitHostPort(t.DataAddress); err == nil {
		port, _ = strconv.Atoi(p)
	}
	return taskManagerBody{
		ID: t.ResourceID, Path: t.RPCAddress, DataPort: port, DataAddress: t.DataAddress,
		LastHeartbeat: ms(t.LastHeartbeat), Slots: t.Slots, FreeSlots: t.FreeSlots,
		Hardware: hardwareBody{CPUCores: t.CPUCores, PhysicalMemory: t.MemoryBytes},
	}
}

// getTaskManagers is GET /taskmanagers. TaskManagers are the cluster's,
// not a tenant's: every tenant sees them, as `sluice overview` does.
func (s *Server) getTaskManagers(ctx context.Context, r *request) (int, any, error) {
	o := s.cfg.Dispatcher.Overview(ctx, r.tenant)
	out := struct {
		TaskManagers []taskManagerBody `json:"taskmanagers"`
	}{TaskManagers: []taskManagerBody{}}
	for _, t := range o.TaskManagers {
		out.TaskManagers = append(out.TaskManagers, taskManagerOf(t))
	}
	return http.StatusOK, out, nil
}

func (s *Server) taskManager(ctx context.Context, r *request) (resourcemanager.TaskManagerInfo, error) {
	id := r.param("tm")
	t, ok := tmLookup(s.cfg.Dispatcher.Overview(ctx, r.tenant).Overview, id)
	if !ok {
		return t, rpcerr.Errorf(rpcerr.ErrNotFound, "task manager %q not found: GET /taskmanagers lists them", id)
	}
	return t, nil
}

// getTaskManager is GET /taskmanagers/:tm.
func (s *Server) getTaskManager(ctx context.Context, r *request) (int, any, error) {
	t, err := s.taskManager(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, taskManagerDetailBody{
		taskManagerBody: taskManagerOf(t),
		Metrics:         taskManagerMetrics{SlotsTotal: t.Slots, SlotsFree: t.FreeSlots, CPUCores: t.CPUCores, PhysicalMemory: t.MemoryBytes},
	}, nil
}

type metricBody struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

// getTaskManagerMetrics is GET /taskmanagers/:tm/metrics[?get=a,b]: Flink's
// metric query shape, a list of {"id","value"} (values as strings);
// without get, every metric.
func (s *Server) getTaskManagerMetrics(ctx context.Context, r *request) (int, any, error) {
	t, err := s.taskManager(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	all := []metricBody{
		{"slotsTotal", strconv.Itoa(t.Slots)},
		{"slotsFree", strconv.Itoa(t.FreeSlots)},
		{"cpuCores", strconv.Itoa(t.CPUCores)},
		{"physicalMemory", strconv.FormatInt(t.MemoryBytes, 10)},
		{"lastHeartbeat", strconv.FormatInt(ms(t.LastHeartbeat), 10)},
	}
	want := r.URL.Query().Get("get")
	if want == "" {
		return http.StatusOK, all, nil
	}
	out := []metricBody{}
	for _, name := range strings.Split(want, ",") {
		for _, m := range all {
			if m.ID == name {
				out = append(out, m)
			}
		}
	}
	return http.StatusOK, out, nil
}

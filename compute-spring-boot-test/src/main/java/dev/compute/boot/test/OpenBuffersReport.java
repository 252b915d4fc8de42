package dev.compute.boot.test;

import dev.compute.memory.AllocationSites;
import dev.compute.memory.LiveBufferReport;
import java.util.List;

/** Open buffers as a failure message lists them: by call site, most bytes first, each site cut to the application's frames. */
final class OpenBuffersReport {

    /** How many call sites a failure lists; the rest are counted. */
    static final int MAX_SITES = 10;

    private OpenBuffersReport() {}

    /** One paragraph per call site, each on a new line; empty for no buffers. */
    static String sites(List<LiveBufferReport> open) {
        if (open.isEmpty()) {
            return "";
        }
        List<AllocationSites.CallSite> sites = AllocationSites.summarize(open, MAX_SITES);
        if (sites.isEmpty()) {
            // a test's manager reads spring.test.compute.* alone: the application's compute.* key would not reach it
            return "\nWhere they were allocated is recorded at leak detection paranoid: for a test's manager "
                    + "spring.test.compute.memory.leak-detection=paranoid (@AutoConfigureComputeMemory's default), for another "
                    + "compute.memory.leak-detection=paranoid or its builder's leakDetection(PARANOID).";
        }
        StringBuilder report = new StringBuilder();
        long listed = 0;
        for (AllocationSites.CallSite site : sites) {
            report.append('\n').append(site.buffers()).append(" buffer(s), ").append(site.sizeBytes()).append(" bytes at ")
                    .append(site.location()).append(", allocated at:\n").append(site.allocationSite());
            listed += site.buffers();
        }
        if (listed < open.size()) {
            report.append("... and ").append(open.size() - listed).append(" more at other sites\n");
        }
        return report.toString();
    }
}

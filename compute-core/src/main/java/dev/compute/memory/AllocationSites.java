package dev.compute.memory;

import dev.compute.memory.lifetime.LeakDetector;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Allocation sites cut down to what a reader needs. Under leak detection {@code paranoid} each buffer carries the
 * stack it was allocated from: in a web service a hundred frames of server and framework below the few lines of the
 * application's own code that matter. Shown as they are for every open buffer, a report runs to megabytes. Here a
 * site keeps its first frames up to the end of the application's code (at most {@link #MAX_FRAMES}), and open
 * buffers are grouped by their call site (the frame that called the manager), largest first, so a report of
 * thousands of buffers is a few kilobytes.
 *
 * <p>A site is text as {@link LiveBufferReport#allocationSite()} has it: one {@code \tat frame} line per frame,
 * the caller of the manager first. A frame is the framework's when its class is in one of the packages of the JDK,
 * Spring, Jakarta EE, the common servers or JUnit; any other is the application's.
 */
public final class AllocationSites {

    /** The most frames a shortened site keeps. */
    public static final int MAX_FRAMES = 8;

    private static final List<String> FRAMEWORK_PACKAGES = List.of("java.", "javax.", "jdk.", "sun.", "com.sun.", "jakarta.",
            "org.springframework.", "org.apache.", "org.eclipse.jetty.", "io.undertow.", "io.netty.", "reactor.", "org.junit.");

    private static final String FRAME_PREFIX = "\tat ";

    /** The open buffers of one call site at one location: how many, their bytes, and one of their sites, shortened. */
    public record CallSite(MemoryLocation location, long buffers, long sizeBytes, String allocationSite) {}

    private AllocationSites() {}

    /**
     * The site's frames from the top to the last frame of the application's code that follows the call site, at most
     * {@link #MAX_FRAMES}, then a line saying how many were left out; {@code null} stays {@code null}.
     */
    public static @Nullable String shorten(@Nullable String site) {
        return site == null ? null : shortened(site);
    }

    private static String shortened(String site) {
        List<String> frames = site.lines().filter(line -> !line.isBlank()).toList();
        StringBuilder shortened = new StringBuilder();
        int kept = 0;
        boolean inApplication = false;
        for (String frame : frames) {
            boolean application = !isFramework(frame);
            // the framework's frames above the application's are kept (a library that allocates for its caller); below, they end it
            if ((inApplication && !application) || kept == MAX_FRAMES) {
                break;
            }
            inApplication |= application;
            shortened.append(frame).append('\n');
            kept++;
        }
        if (kept < frames.size()) {
            shortened.append("\t... ").append(frames.size() - kept).append(" more\n");
        }
        return shortened.toString();
    }

    /**
     * Buffers with a recorded site, grouped by location and call site, the {@code limit} groups of most bytes first;
     * buffers without a site (leak detection below {@code paranoid}) are left out.
     */
    public static List<CallSite> summarize(Collection<LiveBufferReport> buffers, int limit) {
        record Key(MemoryLocation location, String callSite) {}
        final class Group {
            final String site;
            long buffers;
            long bytes;

            Group(String site) {
                this.site = site;
            }
        }
        Map<Key, Group> groups = new LinkedHashMap<>();
        for (LiveBufferReport buffer : buffers) {
            String site = buffer.allocationSite();
            if (site != null) {
                Group group = groups.computeIfAbsent(new Key(buffer.location(), callSite(site)), key -> new Group(site));
                group.buffers++;
                group.bytes += buffer.sizeBytes();
            }
        }
        return groups.entrySet().stream()
                .map(e -> new CallSite(e.getKey().location(), e.getValue().buffers, e.getValue().bytes, shortened(e.getValue().site)))
                .sorted(Comparator.comparingLong(CallSite::sizeBytes).reversed())
                .limit(limit)
                .toList();
    }

    /**
     * The frames from the caller of the manager on (the manager's own frames left out), at most {@code maxFrames}:
     * where an allocation under way was asked for (by the thread that waited for it, where another serves it).
     */
    public static List<StackTraceElement> callerFrames(int maxFrames) {
        return LeakDetector.callerFrames(maxFrames);
    }


    private static String callSite(String site) {
        int end = site.indexOf('\n');
        return end < 0 ? site : site.substring(0, end);
    }

    private static boolean isFramework(String frame) {
        String text = frame.startsWith(FRAME_PREFIX) ? frame.substring(FRAME_PREFIX.length()) : frame.strip();
        // StackTraceElement.toString() puts a class loader and module before the class: "java.base/java.lang.Thread.run(...)"
        int call = text.indexOf('(');
        String qualified = call < 0 ? text : text.substring(0, call);
        String className = qualified.substring(qualified.lastIndexOf('/') + 1);
        return FRAMEWORK_PACKAGES.stream().anyMatch(className::startsWith);
    }
}

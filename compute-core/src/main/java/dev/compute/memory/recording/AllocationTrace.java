package dev.compute.memory.recording;

import dev.compute.memory.internal.RegularFiles;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.channels.Channels;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystemException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.AbstractList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import java.util.zip.GZIPOutputStream;

/**
 * A finished recording: its events in the order they happened, what bounded it, and its text in the trace
 * replayer's format ({@link #lines()}: a header of {@code #} comments, then one event a line, as
 * {@link TraceEvent#line()} writes it). Immutable.
 *
 * <p>Blocks allocated before the recording started and freed during it appear as frees of ids that no allocation
 * in the trace has ({@link #earlierBlockFrees()}); the replayer skips them and says how many it skipped. Blocks still
 * live at the end, or allocated before a recording that reached its bound ({@link #truncated()}) stopped taking
 * events, stay live in the trace.
 */
public final class AllocationTrace {

    /** The column layout, as the header states it. */
    public static final String FORMAT = "a,<id>,<bytes>,<stream>,<location>,<thread>,<nanos>[,<call site>] allocates;"
            + " f,<id>,<thread>,<nanos> frees";

    private final RecordingOptions options;
    private final String description;
    private final Instant startedAt;
    private final Duration duration;
    private final EventColumns events;
    private final long allocations;
    private final long frees;
    private final long earlierBlockFrees;
    private final boolean truncated;
    private final Map<Long, String> threadNames;

    AllocationTrace(RecordingOptions options, String description, Instant startedAt, Duration duration, EventColumns events,
                    long allocations, long frees, long earlierBlockFrees, boolean truncated, Map<Long, String> threadNames) {
        this.options = options;
        this.description = description;
        this.startedAt = startedAt;
        this.duration = duration;
        this.events = events;
        this.allocations = allocations;
        this.frees = frees;
        this.earlierBlockFrees = earlierBlockFrees;
        this.truncated = truncated;
        this.threadNames = Map.copyOf(threadNames);
    }

    public RecordingOptions options() {
        return options;
    }

    public Instant startedAt() {
        return startedAt;
    }

    /** From start to stop. */
    public Duration duration() {
        return duration;
    }

    /** The events, oldest first; a view, each event made when it is read. */
    public List<TraceEvent> events() {
        return new AbstractList<>() {
            @Override
            public TraceEvent get(int index) {
                return events.get(index);
            }

            @Override
            public int size() {
                return events.size();
            }
        };
    }

    public long allocations() {
        return allocations;
    }

    /** Frees recorded, those of blocks allocated before the recording started included. */
    public long frees() {
        return frees;
    }

    /** Frees of blocks allocated before the recording started. */
    public long earlierBlockFrees() {
        return earlierBlockFrees;
    }

    /** True when the recording reached {@link RecordingOptions#maxEvents()} and events after that are missing. */
    public boolean truncated() {
        return truncated;
    }

    /** The name of each thread in the trace when it was first seen, by {@link Thread#threadId()}. */
    public Map<Long, String> threadNames() {
        return threadNames;
    }

    /** The trace in the replayer's format, line by line, without line ends; made as it is read. */
    public Stream<String> lines() {
        Stream<String> header = Stream.of(
                "# compute-memory allocation trace; replay it with: java -jar compute-benchmarks.jar replay FILE",
                "# format: " + FORMAT,
                "# stream: always 0, the pool does not tie blocks to streams; thread: Thread.threadId(), named below;"
                        + " nanos: since the recording started; call site: frames apart by ';', the caller of the manager first",
                "# recorded with: " + description,
                "# started=" + startedAt + " duration=" + duration + " events=" + events.size() + " allocations=" + allocations
                        + " frees=" + frees + " max-events=" + options.maxEvents() + " call-site-frames=" + options.callSiteFrames()
                        + " truncated=" + truncated,
                "# earlier-block-frees=" + earlierBlockFrees + ": frees of blocks allocated before the recording started;"
                        + " no allocation in this trace has their ids");
        Stream<String> threads = threadNames.entrySet().stream().sorted(Map.Entry.comparingByKey())
                .map(thread -> "# thread," + thread.getKey() + "," + oneLine(thread.getValue()));
        Stream<String> body = IntStream.range(0, events.size()).mapToObj(i -> events.get(i).line());
        return Stream.of(header, threads, body).flatMap(lines -> lines);
    }

    /** {@code text} with its line ends made spaces: the replayer's readLine ends a line at '\r' as well as at '\n'. */
    static String oneLine(String text) {
        return text.replace('\n', ' ').replace('\r', ' ');
    }

    /** Writes {@link #lines()}, each ended by {@code \n}. */
    public void writeTo(Writer out) throws IOException {
        for (String line : (Iterable<String>) lines()::iterator) {
            out.write(line);
            out.write('\n');
        }
        out.flush();
    }

    /** Writes the trace to {@code file} in UTF-8, gzip'd when its name ends in {@code .gz}, as the replayer reads it. */
    public void writeTo(Path file) throws IOException {
        FileChannel channel = RegularFiles.open(file,
                Set.of(StandardOpenOption.WRITE, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING), "written a trace to");
        try (OutputStream raw = Channels.newOutputStream(channel);
             OutputStream out = file.getFileName().toString().endsWith(".gz") ? new GZIPOutputStream(raw) : raw;
             Writer writer = new OutputStreamWriter(out, StandardCharsets.UTF_8)) {
            writeTo(writer);
        } catch (ClosedByInterruptException e) {
            throw RegularFiles.interrupted("cannot write the trace to " + file, "write", e);
        } catch (IOException e) {
            // a write the system refused (a full disk) says only why ("No space left on device"): which file, too
            throw e instanceof FileSystemException ? e : new IOException("cannot write the trace to " + file + ": " + e.getMessage(), e);
        }
    }
}

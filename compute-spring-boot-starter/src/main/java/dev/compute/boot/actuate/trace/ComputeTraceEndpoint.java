package dev.compute.boot.actuate.trace;

import dev.compute.boot.ComputeProperties;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.nio.charset.StandardCharsets;
import java.util.Enumeration;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.springframework.aot.hint.annotation.RegisterReflectionForBinding;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.WebEndpoint;
import org.springframework.core.io.ByteArrayResource;
import org.springframework.core.io.InputStreamResource;
import org.springframework.core.io.Resource;

/**
 * {@code /actuator/computetrace}: records a manager's allocations and frees into a bounded trace, in the format the
 * trace replayer reads. {@code POST /start} (optionally {@code {"maxEvents": n, "callSiteFrames": n}}, at most
 * {@code compute.memory.recording.max-events}) starts a recording, {@code POST /stop} stops it and keeps its trace,
 * {@code GET} downloads the last trace kept as {@code text/plain} (404 before the first). Each takes the manager's
 * {@code name} ({@code {"name": "gpu"}}, {@code ?name=gpu}), as the {@code computememory} endpoint names managers;
 * without one, the primary manager (the only one, where there is one). Starting while a recording is under way, or
 * stopping when none is, answers 409 with why; an unknown name, or none among several managers of which none is
 * primary, or a value out of range, 400 with why (in the body: Spring Boot's error page leaves an
 * {@link InvalidEndpointRequestException}'s reason out).
 *
 * <p>Off unless granted: the endpoint's default access is none, so it needs both
 * {@code management.endpoint.computetrace.access=unrestricted} (or {@code read-only}, to download only) and
 * exposure. A recording costs every allocation a lock while it runs, and the trace names threads and, with call
 * sites, code; it never holds the contents of memory or native addresses.
 */
@WebEndpoint(id = "computetrace", defaultAccess = Access.NONE)
public class ComputeTraceEndpoint {

    /** A start while a recording is under way, or a stop when none is: the request conflicts with the state. */
    static final int STATUS_CONFLICT = 409;
    /** A request that names no manager there is, or asks for what the settings do not allow: said in the body. */
    static final int STATUS_BAD_REQUEST = 400;
    static final int STATUS_NOT_FOUND = 404;

    private final ObservedManagers managers;
    /** Each manager's recording settings, by its name: a named manager's own, or those of compute.memory.recording. */
    private final Function<String, ComputeProperties.Recording> settings;
    /** The last trace stopped here, by manager name. */
    private final Map<String, AllocationTrace> last = new ConcurrentHashMap<>();

    /** @param settings the recording settings of the manager of each name */
    public ComputeTraceEndpoint(ObservedManagers managers, Function<String, ComputeProperties.Recording> settings) {
        this.managers = managers;
        this.settings = settings;
    }

    /**
     * {@code start} or {@code stop}; {@code maxEvents} and {@code callSiteFrames} are read by {@code start} alone, as
     * text: a number past an {@code int} or no whole number is then refused with the reason, where Actuator's own
     * conversion answers a bare "Parameter mapping failure". Its bodies are named for AOT, which cannot see them through
     * the wildcard.
     */
    @WriteOperation
    @RegisterReflectionForBinding({Started.class, Stopped.class, Refused.class})
    public WebEndpointResponse<?> recording(@Selector String action, @Nullable String name, @Nullable String maxEvents,
                                            @Nullable String callSiteFrames) {
        try {
            return switch (action) {
                case "start" -> {
                    ObservedManager observed = selected(name);
                    yield start(observed, options(observed.name(), maxEvents, callSiteFrames));
                }
                case "stop" -> stop(selected(name));
                default -> throw new InvalidEndpointRequestException("unknown action '" + action + "': start or stop", "unknown action");
            };
        } catch (InvalidEndpointRequestException e) {
            // answered here, with why: Spring Boot's error page leaves the exception's reason out by default
            return new WebEndpointResponse<>(new Refused(name, e.getMessage()), STATUS_BAD_REQUEST);
        }
    }

    private ObservedManager selected(@Nullable String name) {
        String names = String.join(", ", managers.byName().keySet());
        if (name == null) {
            return managers.primary().orElseThrow(() -> new InvalidEndpointRequestException("Name the compute memory manager: there are "
                    + "several and none is primary; managers: " + names, "no manager named, and none of " + names + " is primary"));
        }
        return managers.get(name).orElseThrow(() -> new InvalidEndpointRequestException("No compute memory manager named '" + name
                + "'; managers: " + names, "no manager named '" + name + "'; managers: " + names));
    }

    private RecordingOptions options(String name, @Nullable String maxEvents, @Nullable String callSiteFrames) {
        ComputeProperties.Recording settings = this.settings.apply(name);
        // the manager's memory.recording.max-events, its own or inherited from compute.memory.recording
        int events = within("maxEvents", maxEvents, settings.maxEvents(), 1, settings.maxEvents(),
                " (the recording max-events setting of manager '" + name + "')");
        int frames = within("callSiteFrames", callSiteFrames, settings.callSiteFrames(), 0, RecordingOptions.MAX_CALL_SITE_FRAMES, "");
        return new RecordingOptions(events, frames);
    }

    /** {@code given} as a whole number from {@code min} to {@code max}, {@code unset} where not given; else refused, saying why. */
    private static int within(String parameter, @Nullable String given, int unset, int min, int max, String whyMax) {
        if (given == null) {
            return unset;
        }
        try {
            long value = Long.parseLong(given.strip());
            if (value >= min && value <= max) {
                return (int) value;
            }
        } catch (NumberFormatException e) {
            // a decimal, a word or a number past a long: out of range as much as one too large
        }
        throw new InvalidEndpointRequestException(parameter + " must be from " + min + " to " + max + whyMax + ": " + given,
                parameter + " out of range");
    }

    private WebEndpointResponse<?> start(ObservedManager observed, RecordingOptions options) {
        try {
            observed.manager().startRecording(options);
        } catch (IllegalStateException e) {
            return refused(observed, e);
        }
        return new WebEndpointResponse<>(new Started(observed.name(), true, options.maxEvents(), options.callSiteFrames()));
    }

    private WebEndpointResponse<?> stop(ObservedManager observed) {
        AllocationTrace trace;
        try {
            trace = observed.manager().stopRecording();
        } catch (IllegalStateException e) {
            return refused(observed, e);
        }
        // two stops may return in either order: the trace kept is the one recorded last
        last.merge(observed.name(), trace, (kept, stopped) -> stopped.startedAt().isBefore(kept.startedAt()) ? kept : stopped);
        return new WebEndpointResponse<>(new Stopped(observed.name(), false, trace.events().size(), trace.allocations(), trace.frees(),
                trace.earlierBlockFrees(), trace.truncated(), trace.duration().toMillis()));
    }

    private static WebEndpointResponse<Refused> refused(ObservedManager observed, IllegalStateException e) {
        return new WebEndpointResponse<>(new Refused(observed.name(), e.getMessage()), STATUS_CONFLICT);
    }

    /**
     * The last trace stopped here of the manager {@code name}d (the primary one without a name), in the replayer's
     * format, made as it is sent; 404 before the first, 400 saying why for a manager that is not there.
     */
    @ReadOperation(produces = "text/plain; charset=UTF-8")
    public WebEndpointResponse<Resource> trace(@Nullable String name) {
        AllocationTrace trace;
        try {
            trace = last.get(selected(name).name());
        } catch (InvalidEndpointRequestException e) {
            return new WebEndpointResponse<>(new ByteArrayResource(e.getMessage().getBytes(StandardCharsets.UTF_8)), STATUS_BAD_REQUEST);
        }
        if (trace == null) {
            return new WebEndpointResponse<>(STATUS_NOT_FOUND);
        }
        Iterator<String> lines = trace.lines().iterator();
        InputStream text = new SequenceInputStream(new Enumeration<>() {
            @Override
            public boolean hasMoreElements() {
                return lines.hasNext();
            }

            @Override
            public InputStream nextElement() {
                return new ByteArrayInputStream((lines.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        });
        return new WebEndpointResponse<>(new InputStreamResource(text, "allocation trace started " + trace.startedAt()));
    }

    /** A recording of the manager {@code name} started. */
    public record Started(String name, boolean recording, int maxEvents, int callSiteFrames) {}

    /** A recording of the manager {@code name} stopped; its trace is what {@code GET} downloads now. */
    public record Stopped(String name, boolean recording, int events, long allocations, long frees, long earlierBlockFrees,
                          boolean truncated, long durationMillis) {}

    /** Why a start or stop of the manager {@code name}'s recording (none named: the primary's) was refused. */
    public record Refused(@Nullable String name, String message) {}
}

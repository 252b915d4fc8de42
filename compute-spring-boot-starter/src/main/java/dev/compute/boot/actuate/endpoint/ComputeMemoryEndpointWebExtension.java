package dev.compute.boot.actuate.endpoint;

import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import dev.compute.boot.actuate.endpoint.ComputeMemoryEndpoint.LocationDescriptor;
import dev.compute.boot.actuate.endpoint.ComputeMemoryEndpoint.ManagerDescriptor;
import dev.compute.memory.MemoryLocation;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import org.springframework.aot.hint.annotation.RegisterReflectionForBinding;
import org.springframework.boot.actuate.endpoint.OperationResponseBody;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.EndpointWebExtension;

/**
 * {@code computememory} over HTTP: a manager, or a location, that is not there is a 404 whose body says which and
 * names the managers there are ({@link NotThere}), not the empty 404 of a path no endpoint has, so that a wrong name
 * is told from an endpoint that is not exposed; a trim of a manager not there, a 400 with the same body (Spring Boot's
 * error page leaves an {@code InvalidEndpointRequestException}'s reason out by default). The rest is the endpoint's.
 */
@EndpointWebExtension(endpoint = ComputeMemoryEndpoint.class)
public class ComputeMemoryEndpointWebExtension {

    static final int STATUS_NOT_FOUND = 404;
    static final int STATUS_BAD_REQUEST = 400;

    private final ComputeMemoryEndpoint endpoint;
    private final ObservedManagers managers;

    public ComputeMemoryEndpointWebExtension(ComputeMemoryEndpoint endpoint, ObservedManagers managers) {
        this.endpoint = endpoint;
        this.managers = managers;
    }

    /** {@link ComputeMemoryEndpoint#selection}: a manager, or a location of the primary manager. */
    @ReadOperation
    @RegisterReflectionForBinding({ManagerDescriptor.class, LocationDescriptor.class, NotThere.class})
    public WebEndpointResponse<OperationResponseBody> selection(@Selector String name, @Nullable String maxBlocks) {
        ComputeMemoryEndpoint.Selection found = endpoint.selection(name, maxBlocks);
        if (found != null) {
            return new WebEndpointResponse<>(found);
        }
        MemoryLocation location = ComputeMemoryEndpoint.locationNamed(name);
        Optional<ObservedManager> primary = managers.primary();
        if (location == null) {
            return notThere(noManager(name) + "; nor is it a location (" + names(Arrays.asList(MemoryLocation.values())) + ")");
        }
        if (primary.isEmpty()) {
            return notThere(noManager(name) + "; none is primary, so name the manager whose location it is: /{manager}/" + name);
        }
        return notThere(hasNo(primary.get(), name) + " (the primary manager; no manager is named '" + name + "')");
    }

    /** {@link ComputeMemoryEndpoint#locationOf}: one location of one manager. */
    @ReadOperation
    @RegisterReflectionForBinding({LocationDescriptor.class, NotThere.class})
    public WebEndpointResponse<OperationResponseBody> locationOf(@Selector String name, @Selector String location, @Nullable String maxBlocks) {
        LocationDescriptor found = endpoint.locationOf(name, location, maxBlocks);
        if (found != null) {
            return new WebEndpointResponse<>(found);
        }
        return managers.get(name).map(observed -> notThere(hasNo(observed, location)))
                .orElseGet(() -> notThere(noManager(name)));
    }

    /** {@link ComputeMemoryEndpoint#trim}, of every manager or the one {@code name}d. */
    @WriteOperation
    @RegisterReflectionForBinding({ComputeMemoryEndpoint.TrimDescriptor.class, ComputeMemoryEndpoint.CompactionDescriptor.class, NotThere.class})
    public WebEndpointResponse<OperationResponseBody> trim(@Nullable Boolean all, @Nullable Boolean compact, @Nullable String name) {
        if (name != null && managers.get(name).isEmpty()) {
            return notThere(noManager(name), STATUS_BAD_REQUEST);
        }
        return new WebEndpointResponse<>(endpoint.trim(all, compact, name));
    }

    private String noManager(String name) {
        return "no compute memory manager named '" + name + "'; managers: " + String.join(", ", managers.byName().keySet());
    }

    private static String hasNo(ObservedManager observed, String location) {
        return "manager '" + observed.name() + "' has no location '" + location + "'; its locations: " + names(observed.manager().locations());
    }

    private static String names(Collection<MemoryLocation> locations) {
        return String.join(", ", locations.stream().map(each -> each.name().toLowerCase(Locale.ROOT)).toList());
    }

    private WebEndpointResponse<OperationResponseBody> notThere(String message) {
        return notThere(message, STATUS_NOT_FOUND);
    }

    private WebEndpointResponse<OperationResponseBody> notThere(String message, int status) {
        return new WebEndpointResponse<>(new NotThere(message, List.copyOf(managers.byName().keySet())), status);
    }

    /** What the endpoint answers for a manager or location not there: why, and the managers by name. */
    public record NotThere(String message, List<String> managers) implements OperationResponseBody {}
}

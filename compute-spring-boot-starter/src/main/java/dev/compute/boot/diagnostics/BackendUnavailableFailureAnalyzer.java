package dev.compute.boot.diagnostics;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.List;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.core.Ordered;

/**
 * Explains a start-up stopped because {@code compute.backend} named a backend that cannot run here (or, for
 * {@code auto}, none can): the provider's own reason, the backends on the class path, and what to change; for a named
 * manager ({@link ManagerBackendUnavailableException}), its name and its own properties.
 */
public final class BackendUnavailableFailureAnalyzer extends AbstractFailureAnalyzer<BackendUnavailableException> implements Ordered {

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, BackendUnavailableException cause) {
        List<String> onClassPath = BackendSelection.providers().stream().map(ComputeBackendProvider::name).toList();
        String manager = "";
        String backend = "compute.backend";
        String device = "compute.device";
        if (cause instanceof ManagerBackendUnavailableException named) {
            manager = " of manager '" + named.manager() + "'";
            backend = named.backendProperty();
            device = named.deviceProperty();
        }
        String description = String.format("The compute backend '%s'%s (%s) cannot run here:%n%n    %s%n%nBackends on the class path: %s%n",
                cause.backend(), manager, backend, cause.reason(), onClassPath.isEmpty() ? "none" : String.join(", ", onClassPath));
        String action;
        if (!BackendSelection.AUTO.equals(cause.backend())) {
            action = String.format("Set %s to auto, to take the best backend that can run here (the CPU backend can, at %s 0), "
                    + "or make '%s' available as its reason says (a driver, a device, %s).", backend, device, cause.backend(), device);
        } else if (onClassPath.contains("cpu")) {
            // the CPU backend is there and refused too (compute.device above 0, say): adding it would change nothing
            action = "Make one of the backends above available as its reason says: a driver, a device, or " + device + " (the CPU backend has"
                    + " one device, index 0).";
        } else {
            action = "Add the compute-cpu module to the class path (the CPU backend runs everywhere), or make one of the backends above available"
                    + " as its reason says.";
        }
        return new FailureAnalysis(description, action, cause);
    }

    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE;
    }
}

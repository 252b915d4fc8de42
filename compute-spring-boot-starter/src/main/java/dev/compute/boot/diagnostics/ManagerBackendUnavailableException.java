package dev.compute.boot.diagnostics;

import dev.compute.memory.BackendUnavailableException;

/**
 * The backend of one of the starter's named managers cannot run here: the backend's refusal with the manager's name and
 * the properties that chose its backend and device where this manager's values were set
 * ({@code compute.managers.gpu.backend}, or the inherited {@code compute.backend}), its reason saying them too, so that
 * {@link BackendUnavailableFailureAnalyzer} names those rather than {@code compute.backend} and {@code compute.device}.
 */
public final class ManagerBackendUnavailableException extends BackendUnavailableException {

    private final String manager;
    private final String backendProperty;
    private final String deviceProperty;

    /** @param reason the refusal's reason with the manager's properties in place of {@code compute.*}'s */
    public ManagerBackendUnavailableException(String manager, String backendProperty, String deviceProperty, String reason,
            BackendUnavailableException refusal) {
        super(refusal.backend(), reason);
        this.manager = manager;
        this.backendProperty = backendProperty;
        this.deviceProperty = deviceProperty;
        initCause(refusal);
    }

    public String manager() {
        return manager;
    }

    public String backendProperty() {
        return backendProperty;
    }

    public String deviceProperty() {
        return deviceProperty;
    }
}

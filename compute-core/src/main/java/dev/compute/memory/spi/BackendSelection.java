package dev.compute.memory.spi;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.InvalidSettingException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.TreeSet;

/**
 * Chooses a backend provider: by name, or for {@code auto} the available one of highest priority. Keeps why
 * every other provider was passed over, so the choice can be logged and a failure explained.
 */
public record BackendSelection(ComputeBackendProvider provider, String detail, Map<String, String> passedOver) {

    public static final String AUTO = "auto";
    /** Where backend option {@code key} is set: {@code compute.backend-options.key}. */
    public static final String OPTIONS = "compute.backend-options.";

    public BackendSelection {
        passedOver = Map.copyOf(passedOver);
    }

    /** Every provider the thread's context class loader (else this library's) finds, highest priority first. */
    public static List<ComputeBackendProvider> providers() {
        ClassLoader loader = Thread.currentThread().getContextClassLoader();
        return providers(loader != null ? loader : BackendSelection.class.getClassLoader());
    }

    /** The provider that {@code compute.backend} names (trimmed, any case), if one of {@code providers} has that name. */
    public static Optional<ComputeBackendProvider> named(String name, List<ComputeBackendProvider> providers) {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        return providers.stream().filter(provider -> provider.name().equals(wanted)).findFirst();
    }

    /** Every provider on the class path, highest priority first. */
    public static List<ComputeBackendProvider> providers(ClassLoader classLoader) {
        List<ComputeBackendProvider> all = new ArrayList<>();
        ServiceLoader.load(ComputeBackendProvider.class, classLoader).forEach(all::add);
        all.sort(Comparator.comparingInt(ComputeBackendProvider::priority).reversed());
        return all;
    }

    /**
     * Chooses among {@code providers}. Throws {@link InvalidSettingException} for a name no provider has and
     * {@link BackendUnavailableException} (with the provider's reason) for one that cannot run here.
     */
    public static BackendSelection choose(String name, BackendSettings settings, List<ComputeBackendProvider> providers) {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        Map<String, String> passedOver = new LinkedHashMap<>();
        if (AUTO.equals(wanted)) {
            for (ComputeBackendProvider provider : providers) {
                BackendAvailability availability = safeAvailability(provider, settings);
                if (!availability.available()) {
                    passedOver.put(provider.name(), availability.detail());
                    continue;
                }
                String passOver = provider.autoPassOverReason(settings);
                if (passOver == null) {
                    return new BackendSelection(provider, availability.detail(), passedOver);
                }
                passedOver.put(provider.name(), passOver);
            }
            throw new BackendUnavailableException(AUTO, providers.isEmpty()
                    ? "no compute backend is on the class path; add compute-cpu (the CPU backend always works)"
                    : "no backend on the class path can run here: " + passedOver);
        }
        ComputeBackendProvider provider = named(wanted, providers).orElse(null);
        if (provider != null) {
            List<String> unread = unreadOptions(provider, settings);
            if (!unread.isEmpty()) {
                String key = unread.getFirst();
                throw new InvalidSettingException(OPTIONS + key, settings.option(key), "an option the " + provider.name()
                        + " backend reads: " + String.join(", ", new TreeSet<>(provider.options()))
                        + " (other backends' options only with compute.backend=auto)");
            }
            BackendAvailability availability = safeAvailability(provider, settings);
            if (!availability.available()) {
                throw new BackendUnavailableException(provider.name(), availability.detail());
            }
            for (ComputeBackendProvider other : providers) {
                if (other != provider) {
                    passedOver.put(other.name(), "not chosen: compute.backend is " + provider.name());
                }
            }
            return new BackendSelection(provider, availability.detail(), passedOver);
        }
        List<String> names = new ArrayList<>(List.of(AUTO));
        providers.forEach(p -> names.add(p.name()));
        throw new InvalidSettingException("compute.backend", name,
                "one of " + String.join(", ", names) + " (a backend is offered by its module on the class path: compute-cpu, compute-cuda, compute-opencl)");
    }

    /**
     * The options of {@code settings} that {@code provider} does not read, sorted; empty where the provider
     * does not say which it reads.
     */
    public static List<String> unreadOptions(ComputeBackendProvider provider, BackendSettings settings) {
        Set<String> read = provider.options();
        return read == null ? List.of() : settings.options().keySet().stream().filter(key -> !read.contains(key)).sorted().toList();
    }

    /** A provider that throws while probing (a broken driver install) is unavailable, with the error as the reason. */
    private static BackendAvailability safeAvailability(ComputeBackendProvider provider, BackendSettings settings) {
        try {
            return provider.availability(settings);
        } catch (RuntimeException | LinkageError e) {
            return BackendAvailability.unavailable("probing failed: " + e);
        }
    }
}

package dev.compute.boot;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.boot.diagnostics.ManagerBackendUnavailableException;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.stream.Stream;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.BindHandler;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.PropertySourcesPlaceholdersResolver;
import org.springframework.boot.context.properties.bind.handler.NoUnboundElementsBindHandler;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.UnboundElementsSourceFilter;
import org.springframework.core.env.ConfigurableEnvironment;

/**
 * Builds the managers of the starter: from their properties, then the application's {@link OutOfMemoryHandler}
 * beans (looked up when memory runs out, {@link OutOfMemoryHandlerBeans}, so that they may depend on the manager),
 * then its {@link UnifiedMemoryManagerBuilderCustomizer} beans (each in its order), and a
 * {@link MemoryEventRelays.Relay} for listeners that come later; then its configured budgets ({@link ComputeBudgets}). A
 * setting the builder refuses stops start-up naming the property where the value was set
 * ({@code compute.managers.gpu.memory.pooling.max-pool-size}, or the inherited
 * {@code compute.memory.pooling.max-pool-size}); so does a budget's, the manager closed again.
 */
public final class UnifiedMemoryManagerFactory {

    private static final Log log = LogFactory.getLog(UnifiedMemoryManagerFactory.class);
    private static final String MAX_POOL_SIZE = "compute.memory.pooling.max-pool-size";
    /** Where the one manager's budgets are set. */
    static final String BUDGETS = "compute.budgets";
    /** The keys under {@code compute.*} that are not {@link ComputeProperties}': each is read, and checked, where it is used. */
    private static final List<String> OWN_KEYS_ELSEWHERE = List.of(ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, NamedManagers.PREFIX, BUDGETS);

    private final ConfigurableEnvironment environment;
    private final ListableBeanFactory beans;
    private final ObjectProvider<OutOfMemoryHandler> outOfMemoryHandlers;
    private final ObjectProvider<UnifiedMemoryManagerBuilderCustomizer> customizers;
    private final MemoryEventRelays relays;
    private final ComputeBudgets budgets;
    /** Each manager's recording settings, by its name, for the computetrace endpoint: a named manager may have its own. */
    private final Map<String, ComputeProperties.Recording> recordings = new ConcurrentHashMap<>();

    UnifiedMemoryManagerFactory(ConfigurableEnvironment environment, ListableBeanFactory beans,
            ObjectProvider<OutOfMemoryHandler> outOfMemoryHandlers, ObjectProvider<UnifiedMemoryManagerBuilderCustomizer> customizers,
            MemoryEventRelays relays, ComputeBudgets budgets) {
        this.environment = environment;
        this.beans = beans;
        this.outOfMemoryHandlers = outOfMemoryHandlers;
        this.customizers = customizers;
        this.relays = relays;
        this.budgets = budgets;
    }

    /** The one manager of {@code compute.*}. */
    UnifiedMemoryManager create(ComputeProperties properties) {
        String primary = properties.primary();
        if (primary != null && !primary.isBlank()) {
            throw new InvalidSettingException("compute.primary", primary, "unset: it names one of " + NamedManagers.PREFIX + ", and none is configured");
        }
        checkNoUnknownComputeKeys();
        ConfiguredNames.check(environment, BUDGETS, "a budget name");
        // bound by ComputeProperties, which ignores a key it does not know: a budget with a typo, or a dot in its name
        // (compute.budgets.a.b.limit), would silently not be made
        Binder.get(environment).bind(BUDGETS, Bindable.mapOf(String.class, BudgetProperties.class), new NoUnboundElementsBindHandler(BindHandler.DEFAULT));
        return create(ComputeMemoryAutoConfiguration.DEFAULT_MANAGER_NAME, properties.manager(), UnaryOperator.identity(),
                new Budgets(properties.budgets(), BUDGETS, true));
    }

    /**
     * The manager {@code compute.managers.<name>}, each setting it does not have taken from {@code compute.*};
     * {@code primary}: whether its bean is the one injected where one manager is asked for (not where the application
     * has a primary manager of its own), whose budgets {@link ComputeBudgets#budget(String)} finds by name alone.
     */
    UnifiedMemoryManager createNamed(String name, boolean primary) {
        NamedManagerPropertySource source = new NamedManagerPropertySource(environment, name);
        Binder binder = new Binder(List.of(source), new PropertySourcesPlaceholdersResolver(environment),
                PoolSizeConverter.conversionService()); // as @ConfigurationPropertiesBinding gives compute.*
        ManagerProperties properties = bind(binder, "compute", source::whereSet);
        checkNoUnknownComputeKeys(); // the settings every named manager inherits
        String prefix = NamedManagers.PREFIX + "." + name + ".budgets";
        checkNoUnknownKeys(NamedManagers.PREFIX + "." + name, prefix);
        Binder own = Binder.get(environment);
        Map<String, BudgetProperties> inherited = own.bind(BUDGETS, Bindable.mapOf(String.class, BudgetProperties.class)).orElse(Map.of());
        if (!inherited.isEmpty()) {
            throw new InvalidSettingException(BUDGETS, String.join(", ", inherited.keySet()), "unset where " + NamedManagers.PREFIX
                    + " names the managers: each manager's budgets are its own, under " + NamedManagers.PREFIX + "." + name + ".budgets");
        }
        ConfiguredNames.check(environment, prefix, "a budget name");
        Map<String, BudgetProperties> budgetProperties = own.bind(prefix, Bindable.mapOf(String.class, BudgetProperties.class),
                new NoUnboundElementsBindHandler(BindHandler.DEFAULT)).orElse(Map.of());
        try {
            return create(name, properties, source::whereSet, new Budgets(budgetProperties, prefix, primary));
        } catch (BackendUnavailableException e) {
            throw ofManager(name, e, source::whereSet);
        }
    }

    /**
     * A manager named {@code name} whose settings are read under {@code prefix} alone, with the keys of
     * {@code compute.*} ({@code <prefix>.memory.pooling.max-pool-size}) and its defaults: nothing set under
     * {@code compute.*} reaches it. For test support, which gives a test a manager that the application's own
     * settings cannot break ({@code @AutoConfigureComputeMemory} reads {@code spring.test.compute.*}). A bad setting
     * stops start-up naming the property under {@code prefix}. The application's handlers and customizers apply, as
     * to every manager the starter builds.
     *
     * @param name how the observers and the customizers name the manager ({@code default} for the one manager)
     * @param prefix where its settings are, a property name such as {@code spring.test.compute}
     * @return the manager, which the caller closes
     */
    public UnifiedMemoryManager createFrom(String name, String prefix) {
        return createFrom(name, prefix, ComputeMemoryAutoConfiguration.DEFAULT_MANAGER_NAME.equals(name));
    }

    /**
     * As {@link #createFrom(String, String)}, with the budgets set under {@code <prefix>.budgets} (the keys of
     * {@code compute.budgets}) made with it; {@code primary}: whether it is the manager injected where one is asked for,
     * whose budgets {@link ComputeBudgets#budget(String)} finds by name alone.
     */
    public UnifiedMemoryManager createFrom(String name, String prefix, boolean primary) {
        return createFrom(name, prefix, primary, List.of());
    }

    /**
     * As {@link #createFrom(String, String, boolean)}; a key under {@code prefix} that no setting has (a typo such as
     * {@code <prefix>.memory.pooling.max-pol-size}) stops start-up naming it, as one under {@code compute.*} does, but
     * for {@code readElsewhere}, the full names of keys under {@code prefix} that the caller reads itself
     * ({@code spring.test.compute.replace}). Every property source is checked: a key under {@code prefix} can only be
     * meant for this manager.
     */
    public UnifiedMemoryManager createFrom(String name, String prefix, boolean primary, List<String> readElsewhere) {
        Binder binder = new Binder(ConfigurationPropertySources.get(environment), new PropertySourcesPlaceholdersResolver(environment),
                PoolSizeConverter.conversionService());
        UnaryOperator<String> whereSet = property -> property.startsWith("compute.") ? prefix + property.substring("compute".length()) : property;
        ManagerProperties properties = bind(binder, prefix, whereSet);
        String budgetsPrefix = prefix + ".budgets";
        checkNoUnknownKeys(prefix, ManagerProperties.class, Stream.concat(Stream.of(budgetsPrefix), readElsewhere.stream()).toList(),
                new NoUnboundElementsBindHandler(BindHandler.DEFAULT));
        ConfiguredNames.check(environment, budgetsPrefix, "a budget name");
        Map<String, BudgetProperties> budgetProperties = binder.bind(budgetsPrefix, Bindable.mapOf(String.class, BudgetProperties.class),
                new NoUnboundElementsBindHandler(BindHandler.DEFAULT)).orElse(Map.of());
        try {
            return create(name, properties, whereSet, new Budgets(budgetProperties, budgetsPrefix, primary));
        } catch (BackendUnavailableException e) {
            throw ofManager(name, e, whereSet);
        }
    }

    // A value refused as it is bound (a recording's bounds, checked by its record) names its compute.* property:
    // renamed, as the builder's are, to where this manager's value was set.
    private static ManagerProperties bind(Binder binder, String prefix, UnaryOperator<String> whereSet) {
        try {
            return binder.bindOrCreate(prefix, ManagerProperties.class);
        } catch (BindException e) {
            for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
                if (cause instanceof InvalidSettingException invalid) {
                    throw renamed(invalid, whereSet);
                }
            }
            throw e;
        }
    }

    /**
     * A key under {@code compute.managers.<name>} that no manager setting has stops start-up naming it, as Boot reports
     * unbound properties: a typo ({@code backnd}), a setting that is not a manager's ({@code health.*}), or a name with a
     * dot ({@code compute.managers.my.gpu.backend}, which names a manager {@code my} with the key {@code gpu.backend}),
     * none of which may start a manager with settings other than those written. Its budgets are checked as they are bound
     * ({@code budgets:} with nothing under it, an empty value, is no budgets, as {@code compute.budgets:} is). Every source
     * is checked: {@code COMPUTE_MANAGERS_<NAME>_*} can only be meant for this manager.
     */
    private void checkNoUnknownKeys(String managerPrefix, String budgetsPrefix) {
        checkNoUnknownKeys(managerPrefix, ManagerProperties.class, List.of(budgetsPrefix), new NoUnboundElementsBindHandler(BindHandler.DEFAULT));
    }

    /**
     * A key directly under {@code compute.*} that no setting has ({@code compute.memroy.max-pool-size},
     * {@code compute.memory.pooling.max-pol-size}) stops start-up naming it, as one under a named manager does: Boot
     * ignores it, and a cap that silently does nothing is the worst of typos. Keys that are not {@link ComputeProperties}'
     * own are left to their owners: the starter's switch, the named managers and the budgets (each checked as it is bound).
     * The memory map page's old switch, {@code compute.memory-map.enabled}, is unknown too: the page is the endpoint
     * {@code computememorymap} now, which the switch would not turn off. Environment variables and system properties are
     * not checked, as Boot's own check leaves them out ({@code COMPUTE_*} may be anyone's; this project's tests set
     * {@code -Dcompute.tests.*}).
     */
    private void checkNoUnknownComputeKeys() {
        checkNoUnknownKeys("compute", ComputeProperties.class, OWN_KEYS_ELSEWHERE,
                new NoUnboundElementsBindHandler(BindHandler.DEFAULT, new UnboundElementsSourceFilter()));
    }

    /**
     * Binds {@code settings} at {@code prefix} with {@code check}, the keys at and under {@code leftOut} left to their
     * owners, and so are the elements of a list that a source above sets whole (a profile's {@code warmup: device: []}
     * over the application's warm-up): Boot binds a list from the first source that has it, so those are overridden,
     * not unknown, and its own check reports them only where that source left the list empty.
     */
    private void checkNoUnknownKeys(String prefix, Class<?> settings, List<String> leftOut, NoUnboundElementsBindHandler check) {
        List<ConfigurationPropertyName> others = leftOut.stream().map(ConfigurationPropertyName::of).toList();
        List<ConfigurationPropertySource> sources = new ArrayList<>();
        List<ConfigurationPropertySource> above = new ArrayList<>();
        for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
            List<ConfigurationPropertySource> sourcesAbove = List.copyOf(above);
            sources.add(source.filter(property -> others.stream().noneMatch(other -> other.equals(property) || other.isAncestorOf(property))
                    && !inAListSetAbove(property, sourcesAbove)));
            above.add(source);
        }
        new Binder(sources, new PropertySourcesPlaceholdersResolver(environment), PoolSizeConverter.conversionService())
                .bind(prefix, Bindable.of(settings), check);
    }

    /** Whether {@code property} is in an element of a list ({@code warmup.device[0].size}) that one of {@code above} sets as a value. */
    private static boolean inAListSetAbove(ConfigurationPropertyName property, List<ConfigurationPropertySource> above) {
        for (int element = 1; element < property.getNumberOfElements(); element++) {
            if (property.isNumericIndex(element)) {
                ConfigurationPropertyName list = property.chop(element);
                return above.stream().anyMatch(source -> source.getConfigurationProperty(list) != null);
            }
        }
        return false;
    }

    /** A manager's configured budgets, set under {@code prefix}; {@code primary}: the manager is the one injected where one is asked for. */
    private record Budgets(Map<String, BudgetProperties> properties, String prefix, boolean primary) {}

    private UnifiedMemoryManager create(String name, ManagerProperties properties, UnaryOperator<String> whereSet, Budgets configured) {
        UnifiedMemoryManager manager;
        MemoryEventRelays.Relay relay = new MemoryEventRelays.Relay();
        try {
            UnifiedMemoryManagerBuilder builder = properties.toBuilder().name(name).eventListener(relay);
            // by name, not by making them: a handler bean may need this manager
            if (beans.getBeanNamesForType(OutOfMemoryHandler.class, true, false).length > 0) {
                builder.outOfMemoryHandler(new OutOfMemoryHandlerBeans(outOfMemoryHandlers));
            }
            customizers.orderedStream().filter(customizer -> customizer.appliesTo(name)).forEach(customizer -> customizer.customize(builder));
            manager = builder.build();
        } catch (InvalidSettingException e) {
            throw renamed(e, whereSet);
        }
        try {
            budgets.make(name, configured.primary(), manager, configured.properties(), configured.prefix());
        } catch (RuntimeException e) {
            manager.close();
            throw e instanceof InvalidSettingException invalid ? renamed(invalid, whereSet) : e;
        }
        relays.register(manager, relay);
        recordings.put(name, properties.memory().recording());
        warnOfACapBeyondTheDevice(name, manager, whereSet);
        return manager;
    }

    /**
     * A cap above the memory the device has never binds: allocations fail as the device runs out first, and health's cap
     * warning never comes. Told where it is set, not refused: the default cap is above a small container's memory, host
     * and unified memory may go beyond a GPU's, and a generous cap meant as none is common.
     */
    private void warnOfACapBeyondTheDevice(String name, UnifiedMemoryManager manager, UnaryOperator<String> whereSet) {
        long cap = manager.settings().maxPoolSize();
        BackendInfo device = manager.backendInfo();
        // the default cap above a small device's memory is no setting of the user's to correct
        boolean set = Binder.get(environment).bind(whereSet.apply(MAX_POOL_SIZE), String.class).isBound();
        if (set && device.deviceTotalBytes() > 0 && cap > device.deviceTotalBytes()) {
            log.warn(whereSet.apply(MAX_POOL_SIZE) + " of manager '" + name + "' is " + cap + " bytes, more than the " + device.deviceTotalBytes()
                    + " bytes of memory its device has (" + device.deviceName() + ", backend '" + device.backend() + "'): allocations fail as the "
                    + "device runs out before the cap is reached, and health's cap warning never comes. Set a size within the device's memory, "
                    + "or a share of it, such as 80%");
        }
    }

    /**
     * The recording settings ({@code max-events}, {@code call-site-frames}) of the manager {@code name} the starter
     * built, its own or those it inherits from {@code compute.memory.recording}; empty for a manager it did not build.
     */
    public Optional<ComputeProperties.Recording> recordingOf(String name) {
        return Optional.ofNullable(recordings.get(name));
    }

    // The backend's refusal names compute.backend and compute.device, in its reason and, through the analyzer, in what to
    // change: a named manager's are renamed to where its values were set, as a refused setting's are.
    private static ManagerBackendUnavailableException ofManager(String name, BackendUnavailableException e, UnaryOperator<String> whereSet) {
        String reason = InvalidSettingFailureAnalyzer.PROPERTY_IN_TEXT.matcher(e.reason())
                .replaceAll(found -> Matcher.quoteReplacement(whereSet.apply(found.group())));
        return new ManagerBackendUnavailableException(name, whereSet.apply("compute.backend"), whereSet.apply("compute.device"), reason, e);
    }

    // The builder names compute.* properties, in the message's property and in what is allowed ("at most
    // compute.memory.pooling.release-threshold"): each is renamed to where this manager's value was set.
    private static InvalidSettingException renamed(InvalidSettingException e, UnaryOperator<String> whereSet) {
        String property = whereSet.apply(BackendOptions.asProperty(e.property()).orElse(e.property()));
        String allowed = InvalidSettingFailureAnalyzer.PROPERTY_IN_TEXT.matcher(e.allowed()).replaceAll(found -> Matcher.quoteReplacement(whereSet.apply(found.group())));
        if (property.equals(e.property()) && allowed.equals(e.allowed())) {
            return e;
        }
        InvalidSettingException renamed = new InvalidSettingException(property, e.value(), allowed);
        renamed.addSuppressed(e);
        return renamed;
    }
}

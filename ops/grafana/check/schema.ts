// The shape a dashboard of ops/grafana must have, from Grafana's own published schema types
// (@grafana/schema: the dashboard, the timeseries and stat panels' options and field config).
// check-dashboard.mjs assigns each dashboard's JSON, as an object literal, to `Board`, so tsc
// reports any field Grafana does not know (a misspelt key), a missing required one, or a value of
// the wrong type or outside an enum.
import type { DataQuery, Dashboard, FieldConfig, FieldConfigSource, Panel, RowPanel } from "@grafana/schema";
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";
import type { Options as StatOptions } from "@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen";

/** What JSON holds for T: a string enum as its string values (JSON has no enum members). */
export type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Json<U>>
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

/** A query of Grafana's Prometheus data source (its dataquery schema's fields this board uses). */
export interface PrometheusQuery extends DataQuery {
  expr: string;
  legendFormat?: string;
  range?: boolean;
  instant?: boolean;
  editorMode?: "code" | "builder";
  format?: "time_series" | "table" | "heatmap";
  interval?: string;
  exemplar?: boolean;
}

type PanelBase = Json<Omit<Panel, "type" | "options" | "fieldConfig" | "targets">> & {
  targets: Array<Json<PrometheusQuery>>;
};

type FieldDefaults<Custom> = Json<Omit<FieldConfig, "custom">> & { custom?: Json<Custom> };

export type TimeSeriesPanel = PanelBase & {
  type: "timeseries";
  options: Json<TimeSeriesOptions>;
  fieldConfig: Json<Omit<FieldConfigSource, "defaults">> & { defaults: FieldDefaults<TimeSeriesFieldConfig> };
};

export type StatPanel = PanelBase & {
  type: "stat";
  options: Json<StatOptions>;
  fieldConfig: Json<Omit<FieldConfigSource, "defaults">> & { defaults: FieldDefaults<Record<string, never>> };
};

export type Row = Json<Omit<RowPanel, "panels">> & { type: "row"; panels: Array<TimeSeriesPanel | StatPanel> };

export type Board = Json<Omit<Dashboard, "panels">> & { panels: Array<TimeSeriesPanel | StatPanel | Row> };
